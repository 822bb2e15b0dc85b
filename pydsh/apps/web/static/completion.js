// Composer completion (spec 12 F29 and the session reference): "/" at the start of the prompt offers the
// commands, "@" at the start of a word offers other sessions (chosen → attached as a reference) and
// workspace files (chosen → "@path" inserted). One small listbox above the textarea; focus stays in the
// textarea (aria-activedescendant), arrows move, Enter or Tab picks, Escape closes.

import { announce, h, icon, replace } from "./dom.js";

const FILE_DELAY_MS = 120;
const KINDS = { command: { tag: "Command", icon: "code" }, argument: { tag: "Option", icon: "code" }, session: { tag: "Session", icon: "message" }, file: { tag: "File", icon: "file" } };

/**
 * What the text before the caret asks for: a command, a command's argument, or an "@" mention.
 * @param {string} before
 * @returns {{kind: "command" | "argument" | "mention", query: string, start: number, command?: string} | null}
 */
export function trigger(before) {
  let m = before.match(/^\/([\w-]*)$/);
  if (m) return { kind: "command", query: m[1], start: 0 };
  m = before.match(/^\/([\w-]+) (\S*)$/);
  if (m) return { kind: "argument", query: m[2], start: before.length - m[2].length, command: m[1] };
  m = before.match(/(^|\s)@([^\s@]*)$/);
  if (m) return { kind: "mention", query: m[2], start: before.length - m[2].length - 1 };
  return null;
}

/** The completion popup of one textarea. */
export class Completion {
  /**
   * @param {HTMLTextAreaElement} input
   * @param {{commands: () => Array<{name: string, description: string, args?: () => string[]}>,
   *   sessions: (query: string) => Array<{sessionId: string, title: string}>,
   *   findSessions: (query: string) => Promise<Array<{sessionId: string, title: string}>>,
   *   merge: (shown: Array<{sessionId: string}>, found: Array<{sessionId: string}>) => Array<{sessionId: string, title: string}>,
   *   files: (query: string) => Promise<string[]>, attach: (session: {sessionId: string, title: string}) => void}} sources
   */
  constructor(input, sources) {
    this.input = input;
    this.sources = sources;
    this.items = [];
    this.active = -1;
    this.context = null;
    this.dismissed = null;
    this.request = 0;
    this.el = h("div", { id: "composer-completion", class: "completion popover", role: "listbox", "aria-label": "Suggestions", hidden: true });
    this.el.addEventListener("mousedown", (e) => e.preventDefault());
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", this.el.id);
    input.addEventListener("input", () => this.update());
    input.addEventListener("click", () => this.update());
    input.addEventListener("blur", () => this.close());
  }

  get open() {
    return !this.el.hidden;
  }

  /** Re-read the text before the caret and show what it asks for (or close). */
  update() {
    const caret = this.input.selectionStart ?? this.input.value.length;
    const context = trigger(this.input.value.slice(0, caret));
    if (!context || (this.dismissed && this.dismissed.start === context.start && this.dismissed.kind === context.kind)) {
      if (!context) this.dismissed = null;
      this.close();
      return;
    }
    this.context = context;
    if (context.kind === "mention") this.mention(context);
    else this.show(this.commandItems(context));
  }

  commandItems(context) {
    const commands = this.sources.commands();
    if (context.kind === "command") {
      return commands.filter((c) => c.name.startsWith(context.query.toLowerCase())).map((c) => ({ kind: "command", label: `/${c.name}`, detail: c.description, value: c }));
    }
    const command = commands.find((c) => c.name === context.command);
    const args = command?.args ? command.args() : [];
    return args.filter((a) => a.toLowerCase().includes(context.query.toLowerCase())).map((a) => ({ kind: "argument", label: a, detail: `/${command.name} ${a}`, value: a }));
  }

  /** The sidebar's sessions at once, then every session the server finds by title and the workspace's files
   * when it answers (a newer keystroke wins). */
  mention(context) {
    const shown = this.sources.sessions(context.query);
    this.show(shown.map(sessionItem), true);
    const request = ++this.request;
    window.clearTimeout(this.fileTimer);
    this.fileTimer = window.setTimeout(async () => {
      const [found, files] = await Promise.all([this.sources.findSessions(context.query).catch(() => []), this.sources.files(context.query).catch(() => [])]);
      if (request !== this.request || this.context !== context) return;
      const sessions = this.sources.merge(shown, found).map(sessionItem);
      this.show([...sessions, ...files.map((f) => ({ kind: "file", label: f, detail: "Insert its workspace path", value: f }))]);
    }, FILE_DELAY_MS);
  }

  /** Render `items` grouped by kind; `loading` keeps the popup open while files are still coming. */
  show(items, loading = false) {
    this.items = items;
    this.active = items.length ? 0 : -1;
    if (!items.length && !loading) {
      this.close();
      return;
    }
    const groups = [];
    for (const [kind, title] of [["command", "Commands"], ["argument", "Options"], ["session", "Sessions"], ["file", "Files"]]) {
      const options = items.map((item, i) => [item, i]).filter(([item]) => item.kind === kind).map(([item, i]) => this.option(item, i));
      if (options.length) groups.push(h("div", { role: "group", class: "completion-group", "aria-label": title }, h("div", { class: "completion-title", "aria-hidden": "true", text: title }), options));
    }
    if (loading) groups.push(h("div", { class: "completion-title muted", "aria-hidden": "true", text: "Looking for files…" }));
    replace(this.el, groups);
    this.el.hidden = false;
    this.highlight();
    announce(`${items.length} suggestion${items.length === 1 ? "" : "s"}`);
  }

  option(item, i) {
    const kind = KINDS[item.kind];
    const el = h(
      "div",
      { role: "option", id: `completion-${i}`, class: "completion-option", dataset: { kind: item.kind }, "aria-selected": "false" },
      icon(kind.icon),
      h("span", { class: "completion-tag", text: kind.tag }),
      h("span", { class: "completion-label", text: item.label }),
      h("span", { class: "completion-detail muted", text: item.detail }),
    );
    el.addEventListener("click", () => this.pick(i));
    return el;
  }

  highlight() {
    for (const el of this.el.querySelectorAll("[role=option]")) el.setAttribute("aria-selected", String(el.id === `completion-${this.active}`));
    if (this.active < 0) {
      this.input.removeAttribute("aria-activedescendant");
      return;
    }
    this.input.setAttribute("aria-activedescendant", `completion-${this.active}`);
    this.el.querySelector(`#completion-${this.active}`)?.scrollIntoView({ block: "nearest" });
  }

  /**
   * Keys while the popup is open; returns true when the key was used here.
   * @param {KeyboardEvent} e
   */
  key(e) {
    if (!this.open || e.isComposing) return false;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      if (!this.items.length) return false;
      e.preventDefault();
      const step = e.key === "ArrowDown" ? 1 : this.items.length - 1;
      this.active = (this.active + step) % this.items.length;
      this.highlight();
      return true;
    }
    if ((e.key === "Enter" || e.key === "Tab") && !e.shiftKey && this.active >= 0) {
      e.preventDefault();
      this.pick(this.active);
      return true;
    }
    if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      this.dismissed = this.context;
      this.close();
      return true;
    }
    return false;
  }

  /** Apply one suggestion to the text (or attach a session) and close. */
  pick(i) {
    const item = this.items[i];
    const context = this.context;
    if (!item || !context) return;
    const value = this.input.value;
    const caret = this.input.selectionStart ?? value.length;
    let insert = "";
    if (item.kind === "command") insert = `/${item.value.name}${item.value.args ? " " : ""}`;
    else if (item.kind === "argument") insert = item.value;
    else if (item.kind === "file") insert = `@${item.value} `;
    else this.sources.attach(item.value);
    this.input.value = value.slice(0, context.start) + insert + value.slice(caret);
    const at = context.start + insert.length;
    this.input.setSelectionRange(at, at);
    this.close();
    // What was just completed stays closed; a command's options open next.
    if (!(item.kind === "command" && item.value.args)) this.dismissed = trigger(this.input.value.slice(0, at));
    this.input.dispatchEvent(new Event("input"));
    if (item.kind === "session") announce(`Referencing ${item.label}`);
  }

  close() {
    this.request++;
    window.clearTimeout(this.fileTimer);
    this.el.hidden = true;
    this.items = [];
    this.active = -1;
    this.input.removeAttribute("aria-activedescendant");
  }
}

/** A session suggestion. */
function sessionItem(session) {
  return { kind: "session", label: session.title || "New session", detail: "Share a read-only snapshot with the agent", value: session };
}
