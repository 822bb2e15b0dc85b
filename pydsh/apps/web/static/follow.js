// Keeps the chat at its end while new content arrives, without reading layout in the per-event paths: a
// ResizeObserver (which runs after layout, before paint) scrolls once per frame in which the conversation
// grew. When the reader has scrolled up, a "New messages below" button appears instead and jumps to the end.

import { h, icon } from "./dom.js";

/** Distance from the end (px) within which the reader counts as following the conversation. */
const NEAR_END = 48;

/** Stick-to-bottom for one scrolling view. */
export class ChatFollower {
  /**
   * @param {HTMLElement} view  the scrolling element
   * @param {HTMLElement} content  the conversation inside it (observed for growth; focused after a jump)
   */
  constructor(view, content) {
    this.view = view;
    this.content = content;
    this.following = true;
    this.height = 0;
    this.pinned = 0;
    this.button = h("button", { type: "button", class: "btn small new-below", hidden: true }, icon("chevron"), "New messages below");
    this.button.addEventListener("click", () => this.jump(true));
    view.append(this.button);
    view.addEventListener("scroll", () => this.scrolled(), { passive: true });
    new ResizeObserver((entries) => this.resized(entries[entries.length - 1].contentRect.height)).observe(content);
  }

  /** A scroll: ours (at or below where we last pinned the end) keeps following even when the
   * conversation grew again before its event came; the reader's follows again only at the end. */
  scrolled() {
    if (this.following && this.view.scrollTop >= this.pinned) return;
    this.following = this.view.scrollHeight - this.view.scrollTop - this.view.clientHeight <= NEAR_END;
    if (this.following) this.button.hidden = true;
  }

  /** Scroll to the end, remembering where that was. */
  pin() {
    this.view.scrollTop = this.view.scrollHeight;
    this.pinned = this.view.scrollTop;
  }

  /** The conversation changed size (layout is fresh here): follow it, or offer the button when it grew. */
  resized(height) {
    const grew = height > this.height;
    this.height = height;
    if (this.following) this.pin();
    else if (grew) this.button.hidden = false;
  }

  /** Go to the end and follow from now on (a newly opened session, the reader's own message, the button). */
  jump(focus = false) {
    this.following = true;
    this.button.hidden = true;
    this.pin();
    if (focus) this.content.focus({ preventScroll: true });
  }
}
