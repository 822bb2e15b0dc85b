// The sessions sidebar: workspaces (add / remove), their root sessions newest first with age, running
// indicator and Approval / Answer badges, a title filter and "Show N more". The index stream's hello
// brings the newest sessions only; "Show N more" pages through a workspace's others and the filter asks
// the server for matching titles, both with `GET /api/sessions`.

import { api } from "./api.js";
import { age, h, icon, replace } from "./dom.js";
import { app } from "./store.js";

const FIRST = 5;
const SEARCH_DELAY_MS = 250;
const PAGE = 50;
const MAX_PAGE = 500;

/** The sidebar of sessions and workspaces. */
export class Sidebar {
  /**
   * @param {HTMLElement} nav
   * @param {{openSession: (id: string) => void, newSession: (workspaceId?: string) => void, openSettings: () => void, openShortcuts: () => void}} ctx
   */
  constructor(nav, ctx) {
    this.nav = nav;
    this.ctx = ctx;
    this.expanded = new Set();
    this.filter = "";
    /** @type {Map<string, string | null>} next page of each workspace (null: no more); absent: from the top */
    this.cursors = new Map();
    this.loading = new Set();
    this.build();
    app.on("index", () => this.cursors.clear());
    app.on("sessions", () => this.schedule());
    window.setInterval(() => this.schedule(), 30_000);
  }

  build() {
    const collapse = h("button", { type: "button", class: "icon-btn", id: "sidebar-toggle", "aria-label": "Collapse sidebar", "aria-expanded": "true", "aria-controls": "sidebar-body" }, icon("sidebar"));
    collapse.addEventListener("click", () => this.toggle());
    this.newButton = h("button", { type: "button", class: "btn new-session", id: "new-session", "aria-keyshortcuts": "Alt+N" }, icon("plus"), "New session");
    this.newButton.addEventListener("click", () => this.ctx.newSession());
    this.filterInput = h("input", { type: "search", class: "input", id: "session-filter", placeholder: "Filter sessions", "aria-label": "Filter sessions", "aria-keyshortcuts": "Control+K" });
    this.filterInput.addEventListener("input", () => {
      this.filter = this.filterInput.value.toLowerCase();
      this.render();
      window.clearTimeout(this.searchTimer);
      if (this.filter) this.searchTimer = window.setTimeout(() => this.search(this.filter), SEARCH_DELAY_MS);
    });
    const add = h("button", { type: "button", class: "icon-btn", "aria-label": "Add workspace", title: "Add workspace", "aria-expanded": "false" }, icon("folder-plus"));
    this.addForm = this.workspaceForm(add);
    add.addEventListener("click", () => {
      const open = this.addForm.hidden;
      this.addForm.hidden = !open;
      this.addForm.querySelector("#browse-workspace").hidden = !app.info?.features?.directoryBrowser;
      add.setAttribute("aria-expanded", String(open));
      if (open) this.addForm.querySelector("input").focus();
    });
    this.list = h("div", { class: "workspaces" });
    const settings = h("button", { type: "button", class: "btn ghost", id: "open-settings", "aria-keyshortcuts": "Control+," }, icon("gear"), "Settings");
    settings.addEventListener("click", () => this.ctx.openSettings());
    const keys = h("button", { type: "button", class: "btn ghost", "aria-keyshortcuts": "?" }, icon("keyboard"), "Shortcuts");
    keys.addEventListener("click", () => this.ctx.openShortcuts());
    this.body = h(
      "div",
      { id: "sidebar-body", class: "sidebar-body" },
      this.newButton,
      this.filterInput,
      h("div", { class: "section-head" }, h("h2", { class: "section-title", text: "Workspaces" }), add),
      this.addForm,
      this.list,
    );
    replace(this.nav, h("div", { class: "brand-row" }, h("span", { class: "brand", text: "pydsh" }), collapse), this.body, h("div", { class: "sidebar-foot" }, settings, keys));
  }

  workspaceForm(opener) {
    const input = h("input", { type: "text", class: "input", placeholder: "/path/to/project or ~/project", "aria-label": "Workspace path" });
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    const browse = h("button", { type: "button", class: "btn small", id: "browse-workspace", text: "Browse…" });
    browse.addEventListener("click", () => this.browse(input, form, error));
    const form = h("form", { class: "add-workspace", hidden: true }, input, h("button", { type: "submit", class: "btn small", text: "Add" }), browse, error);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      error.hidden = true;
      try {
        const result = await api.addWorkspace(input.value.trim());
        app.upsertWorkspace(result.workspace);
        input.value = "";
        form.hidden = true;
        opener.setAttribute("aria-expanded", "false");
        opener.focus();
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
      }
    });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Escape") {
        form.hidden = true;
        opener.setAttribute("aria-expanded", "false");
        opener.focus();
      }
    });
    return form;
  }

  /** The directory browser (F6), loaded when first asked for; the folder chosen is added like a typed one. */
  async browse(input, form, error) {
    error.hidden = true;
    try {
      const { chooseDirectory } = await import("./directories.js");
      const path = await chooseDirectory();
      if (!path) return;
      input.value = path;
      form.requestSubmit();
    } catch (err) {
      error.textContent = `The folder browser is unavailable — type the path instead (${err.message}).`;
      error.hidden = false;
    }
  }

  toggle() {
    const collapsed = document.body.classList.toggle("sidebar-collapsed");
    const button = this.nav.querySelector("#sidebar-toggle");
    button.setAttribute("aria-expanded", String(!collapsed));
    button.setAttribute("aria-label", collapsed ? "Expand sidebar" : "Collapse sidebar");
    this.body.hidden = collapsed;
    this.nav.querySelector(".sidebar-foot").hidden = collapsed;
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    window.requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  render() {
    const active = document.activeElement;
    const activeKey = active?.dataset?.focusKey;
    const groups = new Map();
    for (const ws of app.workspaces.values()) groups.set(ws.workspaceId, { ws, sessions: [] });
    for (const s of app.sessions.values()) {
      if (s.parentSessionId) continue;
      if (this.filter && !(s.title || "New session").toLowerCase().includes(this.filter)) continue;
      const key = s.workspaceId || s.cwd;
      if (!groups.has(key)) groups.set(key, { ws: { workspaceId: key, path: s.cwd, name: s.cwd.split("/").filter(Boolean).pop() || s.cwd }, sessions: [] });
      groups.get(key).sessions.push(s);
    }
    const nodes = [];
    for (const { ws, sessions } of groups.values()) {
      sessions.sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0));
      nodes.push(this.workspaceNode(ws, sessions));
    }
    if (!nodes.length) nodes.push(h("p", { class: "muted small-note", text: "No workspaces yet." }));
    replace(this.list, nodes);
    if (activeKey) this.list.querySelector(`[data-focus-key="${CSS.escape(activeKey)}"]`)?.focus();
  }

  /** Sessions the server has for a workspace: its count until every page is loaded, then what was loaded. */
  total(ws, sessions) {
    return this.cursors.get(ws.workspaceId) === null ? sessions.length : Math.max(ws.sessionCount || 0, sessions.length);
  }

  /** Load the next page of a workspace's sessions: the first time, those loaded so far and 50 more. */
  async loadMore(ws, loaded) {
    const id = ws.workspaceId;
    if (this.loading.has(id) || this.cursors.get(id) === null) return;
    this.loading.add(id);
    try {
      const cursor = this.cursors.get(id);
      const page = await api.sessions({ workspace: id, cursor, limit: cursor ? PAGE : Math.min(MAX_PAGE, loaded + PAGE) });
      this.cursors.set(id, page.nextCursor ?? null);
      app.upsertSessions(page.sessions || []);
    } finally {
      this.loading.delete(id);
    }
  }

  /** Ask the server for sessions whose title matches the filter, loaded or not. */
  async search(filter) {
    const page = await api.sessions({ q: filter });
    if (filter === this.filter) app.upsertSessions(page.sessions || []);
  }

  workspaceNode(ws, sessions) {
    const showAll = this.expanded.has(ws.workspaceId) || this.filter;
    const shown = showAll ? sessions : sessions.slice(0, FIRST);
    const total = this.filter ? sessions.length : this.total(ws, sessions);
    const remove = h("button", { type: "button", class: "icon-btn ws-remove", "aria-label": `Remove workspace ${ws.name}`, title: "Remove (files are untouched)", dataset: { focusKey: `rm-${ws.workspaceId}` } }, icon("close"));
    remove.addEventListener("click", async () => {
      await api.removeWorkspace(ws.workspaceId);
      app.removeWorkspace(ws.workspaceId);
    });
    const newHere = h("button", { type: "button", class: "icon-btn", "aria-label": `New session in ${ws.name}`, title: "New session here", dataset: { focusKey: `new-${ws.workspaceId}` } }, icon("plus"));
    newHere.addEventListener("click", () => this.ctx.newSession(ws.workspaceId));
    const list = h("ul", { class: "session-list", "aria-label": `Sessions in ${ws.name}` }, shown.map((s) => this.sessionNode(s)));
    const out = h("div", { class: "workspace", dataset: { workspaceId: ws.workspaceId } }, h("div", { class: "ws-head" }, icon("folder"), h("span", { class: "ws-name", title: ws.path, text: ws.name }), newHere, remove), list);
    if (total > shown.length) {
      const more = h("button", { type: "button", class: "link-btn show-more", text: `Show ${total - shown.length} more`, dataset: { focusKey: `more-${ws.workspaceId}` } });
      more.addEventListener("click", () => {
        this.expanded.add(ws.workspaceId);
        this.render();
        if (sessions.length < total) this.loadMore(ws, sessions.length);
      });
      out.append(more);
    }
    return out;
  }

  sessionNode(s) {
    const current = app.current?.id === s.sessionId;
    const title = s.title || "New session";
    const badges = [];
    if (s.waiting?.approvals) badges.push(h("span", { class: "badge badge-approval" }, icon("shield"), "Approval"));
    if (s.waiting?.questions) badges.push(h("span", { class: "badge badge-answer" }, icon("question"), "Answer"));
    // Prompts waiting their turn, also those an offline session's log keeps (they run when it is next opened).
    if (s.queued) badges.push(h("span", { class: "badge badge-queued" }, icon("list"), `${s.queued} queued`));
    const button = h(
      "button",
      { type: "button", class: `session-row${current ? " current" : ""}`, "aria-current": current ? "page" : null, dataset: { sessionId: s.sessionId, focusKey: `s-${s.sessionId}` } },
      s.status === "running" ? h("span", { class: "running", role: "img", "aria-label": "running" }, h("span", { class: "spinner" })) : null,
      h("span", { class: "session-title", text: title }),
      badges,
      h("span", { class: "session-age", text: age(s.updatedAt || s.createdAt || Date.now()) }),
    );
    button.addEventListener("click", () => this.ctx.openSession(s.sessionId));
    return h("li", null, button);
  }
}
