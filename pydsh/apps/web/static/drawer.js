// The sidebar as a drawer where the page is narrow (a phone, or a laptop at 200 % zoom): a header button
// opens it over the page; Escape, a tap outside or choosing an action closes it; focus moves into it and
// returns to the button.

import { h, icon } from "./dom.js";

const NARROW = "(max-width: 760px)";
const ACTIONS = ".session-row, #new-session, [data-focus-key^='new-'], .sidebar-foot button";

/** The sidebar drawer of narrow layouts (the wide layout shows the sidebar and hides the button). */
export class Drawer {
  /**
   * @param {HTMLElement} nav the sidebar
   * @param {HTMLElement} header where the menu button goes (first)
   * @param {{beforeOpen: () => void}} ctx
   */
  constructor(nav, header, ctx) {
    this.nav = nav;
    this.ctx = ctx;
    this.button = h("button", { type: "button", id: "drawer-button", class: "icon-btn drawer-button", "aria-label": "Sessions and settings", "aria-expanded": "false", "aria-controls": "sidebar" }, icon("sidebar"));
    this.button.addEventListener("click", () => (this.isOpen() ? this.close(true) : this.open()));
    this.backdrop = h("div", { class: "drawer-backdrop", hidden: true });
    this.backdrop.addEventListener("click", () => this.close(true));
    header.prepend(this.button);
    nav.after(this.backdrop);
    this.listen();
  }

  /** Close on Escape, on an action chosen inside (before it runs, so dialogs return focus to the button),
   * when focus leaves the drawer, and when the page becomes wide. */
  listen() {
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && this.isOpen() && !document.querySelector("dialog[open]")) {
        e.preventDefault();
        this.close(true);
      }
    });
    this.nav.addEventListener("click", (e) => {
      if (this.isOpen() && /** @type {Element} */ (e.target).closest(ACTIONS)) this.close(true);
    }, { capture: true });
    this.nav.addEventListener("focusout", (e) => {
      const to = /** @type {Node | null} */ (e.relatedTarget);
      if (this.isOpen() && to && !this.nav.contains(to)) this.close(false);
    });
    window.matchMedia(NARROW).addEventListener("change", (e) => {
      if (!e.matches) this.close(false);
    });
  }

  /** Whether the layout is narrow (the sidebar is a drawer). */
  narrow() {
    return window.matchMedia(NARROW).matches;
  }

  isOpen() {
    return document.body.classList.contains("drawer-open");
  }

  open() {
    this.ctx.beforeOpen();
    document.body.classList.add("drawer-open");
    this.backdrop.hidden = false;
    this.button.setAttribute("aria-expanded", "true");
    /** @type {HTMLElement | null} */ (this.nav.querySelector("#new-session"))?.focus();
  }

  /** Close the drawer; `refocus` returns focus to the menu button. */
  close(refocus) {
    if (!this.isOpen()) return;
    document.body.classList.remove("drawer-open");
    this.backdrop.hidden = true;
    this.button.setAttribute("aria-expanded", "false");
    if (refocus) this.button.focus();
  }
}
