// Incremental Markdown for streamed and long answers. The text is cut into blocks at blank lines outside
// fenced code; a finished block is rendered once and kept, only the open last block is drawn again, and the
// work is sliced across animation frames, so an answer of any length never blocks the page for long.
// Committed answers go through the same cut, so a reload shows what was seen live.

import { h } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

/** Milliseconds of rendering per slice; the rest waits for the next animation frame. */
const SLICE_MS = 5;
/** An open block longer than this is drawn again only once it has doubled since it was last drawn. */
const BIG_OPEN_BLOCK = 16 * 1024;
const FENCE = /^\s*(```|~~~)/;
/** Blocks per chunk: chunks off screen skip style, layout and paint, so a 5 MB answer stays cheap to draw. */
const CHUNK_BLOCKS = 40;

/** One answer node filled from its Markdown text, a slice at a time. */
export class MarkdownView {
  /**
   * @param {HTMLElement} node  the element the rendered blocks go into
   * @param {() => void} [onDone]  called once the complete text is rendered
   */
  constructor(node, onDone = () => {}) {
    this.node = node;
    this.onDone = onDone;
    /** Text from the start of the open block on; what comes before it is rendered and let go. */
    this.rest = "";
    /** Offset in `rest` of the first line not yet scanned for a block boundary. */
    this.scan = 0;
    this.fence = null;
    /** Finished blocks not rendered yet, from `next` on. */
    this.ready = [];
    this.next = 0;
    this.openNodes = [];
    this.drawn = -1;
    this.chunk = null;
    this.inChunk = 0;
    this.final = false;
    this.queued = false;
    this.stopped = false;
  }

  /** More streamed text. */
  append(delta) {
    this.rest += delta;
    this.later();
  }

  /** No more text will come: render what is left. */
  end() {
    this.final = true;
    this.later();
  }

  /** A complete text, rendered now as far as one slice goes and the rest in the next frames. */
  render(text) {
    this.rest += text;
    this.final = true;
    this.step();
  }

  /** Stop rendering (the node was dropped). */
  stop() {
    this.stopped = true;
  }

  later() {
    if (this.queued || this.stopped) return;
    this.queued = true;
    window.requestAnimationFrame(() => {
      this.queued = false;
      this.step();
    });
  }

  /** One slice: scan new lines, render finished blocks, then redraw the open block when it changed. */
  step() {
    if (this.stopped) return;
    const until = performance.now() + SLICE_MS;
    this.cut(until);
    while (this.next < this.ready.length && performance.now() < until) {
      this.dropOpen();
      this.place().append(renderMarkdown(this.ready[this.next]));
      this.ready[this.next++] = "";
      this.inChunk++;
    }
    if (this.next < this.ready.length || this.scan < this.rest.lastIndexOf("\n") + 1) {
      this.later();
      return;
    }
    this.ready = [];
    this.next = 0;
    this.drawOpen();
    if (this.final) {
      this.stopped = true;
      this.onDone();
    }
  }

  /** Move finished blocks from `rest` to `ready`: a blank line outside a fenced code block ends one. */
  cut(until) {
    let start = 0;
    let lines = 0;
    for (let nl = this.rest.indexOf("\n", this.scan); nl >= 0; nl = this.rest.indexOf("\n", this.scan)) {
      const line = this.rest.slice(this.scan, nl);
      if (this.fence) {
        if (line.trimStart().startsWith(this.fence)) this.fence = null;
      } else if (FENCE.test(line)) {
        this.fence = FENCE.exec(line)[1];
      } else if (!line.trim()) {
        if (this.scan > start) this.ready.push(this.rest.slice(start, this.scan));
        start = nl + 1;
      }
      this.scan = nl + 1;
      if (++lines % 256 === 0 && performance.now() >= until) break;
    }
    if (start) {
      this.rest = this.rest.slice(start);
      this.scan -= start;
      this.drawn = -1;
    }
  }

  /** Draw the open block again (a big one only once it has doubled, or at the end). */
  drawOpen() {
    const size = this.rest.length;
    if (size === this.drawn) return;
    if (!this.final && size > BIG_OPEN_BLOCK && this.drawn > 0 && size < this.drawn * 2) return;
    this.dropOpen();
    const fragment = renderMarkdown(this.rest);
    this.openNodes = [...fragment.childNodes];
    this.place().append(fragment);
    this.drawn = size;
  }

  /** The chunk the next block goes into (a new one every CHUNK_BLOCKS blocks). */
  place() {
    if (!this.chunk || this.inChunk >= CHUNK_BLOCKS) {
      this.chunk = h("div", { class: "md-chunk" });
      this.node.append(this.chunk);
      this.inChunk = 0;
    }
    return this.chunk;
  }

  dropOpen() {
    for (const node of this.openNodes) node.remove();
    this.openNodes = [];
  }
}
