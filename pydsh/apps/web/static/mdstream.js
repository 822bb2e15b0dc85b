// Incremental Markdown for streamed and long answers. The text is cut into blocks at blank lines outside
// fenced code; a finished block is rendered once and kept, only the open last block is drawn again, and the
// work is sliced across animation frames, so an answer of any length never blocks the page for long.
// Committed answers go through the same cut, so a reload shows what was seen live.

import { h } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

/** Milliseconds of rendering per animation frame: a short slice while the backlog is small, a slightly longer
 * one while it is large. Each millisecond of new blocks costs two to five of style and layout in the same
 * frame, so a longer backlog slice (12 ms) made 60-80 ms frames. */
const SLICE_MS = 5;
const BACKLOG_SLICE_MS = 6;
/** Finished blocks waiting beyond this count as a big backlog. */
const BACKLOG_BLOCKS = 200;
/** Characters of received text handed to the block scan at a time: the text waits in its pieces until then, so
 * a slice never copies or searches megabytes that arrived faster than they can be drawn. */
const FEED = 64 * 1024;
/** An open block longer than this is drawn again only once it has doubled since it was last drawn. */
const BIG_OPEN_BLOCK = 16 * 1024;
const FENCE = /^\s*(```|~~~)/;
/** Blocks per chunk and chunks per shelf: chunks and shelves off screen skip style, layout and paint, and the
 * answer's outline holds shelves, not thousands of chunks, so a 5 MB answer stays cheap to draw per frame.
 * Chunks are small because a new chunk near the screen is laid out whole in the frame it appears. */
const CHUNK_BLOCKS = 8;
const SHELF_CHUNKS = 40;

/** Blocks longer than this show as plain wrapped text: a model's megabyte without a blank line would block the
 * page while parsed as Markdown, and is no formatted prose anyway. */
const PLAIN_BLOCK = 32 * 1024;

/** Characters per piece of a plain block: pieces off screen skip layout, so its megabyte is not laid out at once. */
const PLAIN_PIECE = 16 * 1024;

/** Once an answer has more full shelves than this, a full shelf far off screen lets its nodes go and keeps its
 * text, and is drawn again when scrolled near: garbage collection and layout grow with the number of nodes,
 * and a 5 MB answer holds a quarter of a million of them. */
const DRY_AFTER = 16;
/** How near the viewport (above or below) a let-go shelf is drawn again. */
const NEAR = "150% 0px";

/** One block's nodes: its Markdown, or its plain text (in pieces cut at line ends) when longer than PLAIN_BLOCK. */
function block(text) {
  if (text.length <= PLAIN_BLOCK) return renderMarkdown(text);
  const plain = h("div", { class: "md-plain" });
  for (let at = 0; at < text.length; ) {
    const nl = text.indexOf("\n", at + PLAIN_PIECE);
    const end = nl < 0 ? text.length : nl + 1;
    plain.append(h("div", { class: "md-piece", text: text.slice(at, end) }));
    at = end;
  }
  return plain;
}

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
    /** Received text not handed to the scan yet, and the offset of its unread part in the first piece. */
    this.inbox = [];
    this.inboxAt = 0;
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
    this.shelf = null;
    this.inShelf = 0;
    /** The full shelves; watched for leaving the screen once there are more than DRY_AFTER. */
    this.full = [];
    this.watch = null;
    this.final = false;
    this.queued = false;
    this.stopped = false;
  }

  /** More streamed text. */
  append(delta) {
    this.inbox.push(delta);
    this.later();
  }

  /** No more text will come: render what is left. */
  end() {
    this.final = true;
    this.later();
  }

  /** A complete text, rendered now as far as one slice goes and the rest in the next frames. */
  render(text) {
    this.inbox.push(text);
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
    const until = performance.now() + (this.ready.length - this.next > BACKLOG_BLOCKS ? BACKLOG_SLICE_MS : SLICE_MS);
    this.feed();
    const unscanned = this.cut(until);
    while (this.next < this.ready.length && performance.now() < until) {
      this.dropOpen();
      this.place().append(block(this.ready[this.next]));
      this.shelf.blocks.push(this.ready[this.next]);
      this.ready[this.next++] = "";
      this.inChunk++;
    }
    if (this.next < this.ready.length || unscanned || this.inbox.length) {
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

  /** Hand received text to the scan: at least one piece of up to FEED characters (so a line longer than FEED
   * still grows), then more until FEED characters wait unscanned or none is left. */
  feed() {
    for (let first = true; this.inbox.length && (first || this.rest.length - this.scan < FEED); first = false) {
      const piece = this.inbox[0];
      const end = Math.min(piece.length, this.inboxAt + FEED);
      this.rest += piece.slice(this.inboxAt, end);
      if (end < piece.length) this.inboxAt = end;
      else {
        this.inbox.shift();
        this.inboxAt = 0;
      }
    }
  }

  /** Move finished blocks from `rest` to `ready`: a blank line outside a fenced code block ends one. True when
   * the time ran out with lines left to scan. */
  cut(until) {
    let start = 0;
    let lines = 0;
    let cutShort = false;
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
      if (++lines % 256 === 0 && performance.now() >= until) {
        cutShort = true;
        break;
      }
    }
    if (start) {
      this.rest = this.rest.slice(start);
      this.scan -= start;
      this.drawn = -1;
    }
    return cutShort;
  }

  /** Draw the open block again (a big one only once it has doubled, or at the end). */
  drawOpen() {
    const size = this.rest.length;
    if (size === this.drawn) return;
    if (!this.final && size > BIG_OPEN_BLOCK && this.drawn > 0 && size < this.drawn * 2) return;
    this.dropOpen();
    const fragment = block(this.rest);
    this.openNodes = fragment instanceof DocumentFragment ? [...fragment.childNodes] : [fragment];
    this.place().append(fragment);
    this.drawn = size;
  }

  /** The chunk the next block goes into (a new one every CHUNK_BLOCKS blocks, a new shelf every SHELF_CHUNKS). */
  place() {
    if (!this.chunk || this.inChunk >= CHUNK_BLOCKS) {
      if (!this.shelf || this.inShelf >= SHELF_CHUNKS) {
        if (this.shelf) this.filled(this.shelf);
        this.shelf = new Shelf();
        this.node.append(this.shelf.el);
        this.inShelf = 0;
      }
      this.chunk = h("div", { class: "md-chunk" });
      this.shelf.el.append(this.chunk);
      this.inChunk = 0;
      this.inShelf++;
    }
    return this.chunk;
  }

  dropOpen() {
    for (const node of this.openNodes) node.remove();
    this.openNodes = [];
  }

  /** A shelf took its last block: once there are more than DRY_AFTER, every full shelf is watched for leaving
   * the area near the screen. */
  filled(shelf) {
    this.full.push(shelf);
    if (this.watch) this.watch.observe(shelf.el);
    else if (this.full.length > DRY_AFTER) {
      this.watch = new IntersectionObserver(
        (entries) => {
          for (const e of entries) SHELVES.get(e.target)?.seen(e.isIntersecting, e.boundingClientRect.height);
        },
        { rootMargin: NEAR },
      );
      for (const each of this.full) this.watch.observe(each.el);
    }
  }
}

/** Each shelf by its element, for the watch's entries. */
const SHELVES = new WeakMap();

/** Shelves waiting to let their nodes go, one per animation frame: the watch's first report names every full
 * shelf at once, and removing sixteen shelves' nodes in one task blocked the page for over 100 ms. */
const LETTING_GO = new Set();

function letGoSoon(shelf) {
  if (!LETTING_GO.size) window.requestAnimationFrame(letGoNext);
  LETTING_GO.add(shelf);
}

function letGoNext() {
  const [shelf] = LETTING_GO;
  if (!shelf) return;
  LETTING_GO.delete(shelf);
  shelf.letGo();
  if (LETTING_GO.size) window.requestAnimationFrame(letGoNext);
}

/** Up to SHELF_CHUNKS chunks of rendered blocks, with the blocks' text so its nodes can be let go and drawn
 * again; a let-go shelf keeps its height, so the answer's length and the scroll position do not move. */
class Shelf {
  constructor() {
    this.el = h("div", { class: "md-shelf" });
    SHELVES.set(this.el, this);
    this.blocks = [];
    this.dry = false;
    /** Whether the watch last saw it near the screen, and its height then (kept when its nodes go). */
    this.near = true;
    this.height = 0;
    /** Bumped when the shelf is let go, so a redraw still running across frames stops. */
    this.generation = 0;
  }

  /** The watch saw the shelf enter or leave the area near the screen. */
  seen(near, height) {
    this.near = near;
    if (!near && !this.dry && height > 0) {
      this.height = height;
      letGoSoon(this);
    } else if (near && this.dry) this.redraw();
  }

  /** Let the nodes go (still far from the screen): its height is kept so nothing below it moves. */
  letGo() {
    if (this.near || this.dry) return;
    this.dry = true;
    this.generation++;
    this.el.style.height = `${this.height}px`;
    this.el.replaceChildren();
  }

  /** Render the blocks again, a slice per animation frame, into chunks as they first were. */
  redraw() {
    this.dry = false;
    const generation = this.generation;
    let at = 0;
    let chunk = null;
    const slice = () => {
      if (generation !== this.generation) return;
      const until = performance.now() + SLICE_MS;
      while (at < this.blocks.length && performance.now() < until) {
        if (at % CHUNK_BLOCKS === 0) this.el.append((chunk = h("div", { class: "md-chunk" })));
        chunk.append(block(this.blocks[at++]));
      }
      if (at < this.blocks.length) window.requestAnimationFrame(slice);
      else this.el.style.height = "";
    };
    window.requestAnimationFrame(slice);
  }
}
