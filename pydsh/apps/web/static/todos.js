// The to-dos bar above the composer from the latest todo/write: counts plus the in-progress item,
// expandable to the list; hidden when empty.

import { h, icon, replace } from "./dom.js";

const MARK = { completed: "✓", in_progress: "▸", pending: "○" };

/** The to-dos bar. */
export class TodosBar {
  /** @param {HTMLElement} slot */
  constructor(slot) {
    this.slot = slot;
    this.open = false;
  }

  /** @param {Array<{content: string, status: string}> | null | undefined} todos */
  render(todos) {
    const list = Array.isArray(todos) ? todos : Array.isArray(todos?.todos) ? todos.todos : [];
    if (!list.length) {
      replace(this.slot);
      this.slot.hidden = true;
      return;
    }
    const count = (s) => list.filter((t) => t.status === s).length;
    const counts = `${count("completed")} completed · ${count("in_progress")} in progress · ${count("pending")} pending`;
    const doing = list.find((t) => t.status === "in_progress");
    const toggle = h("button", { type: "button", class: "todos-toggle", "aria-expanded": String(this.open), "aria-controls": "todos-list" }, icon("list"), h("span", { class: "todos-label", text: "To-dos" }), h("span", { class: "todos-counts", text: counts }), doing ? h("span", { class: "todos-doing", text: `· ${doing.content}` }) : null);
    toggle.addEventListener("click", () => {
      this.open = !this.open;
      this.render(list);
      this.slot.querySelector(".todos-toggle")?.focus();
    });
    const items = h("ul", { id: "todos-list", class: "todo-list", hidden: !this.open }, list.map((t) => h("li", { class: `todo-${t.status}` }, h("span", { class: "todo-mark", "aria-hidden": "true", text: MARK[t.status] || "○" }), h("span", { text: t.content }), h("span", { class: "sr-only", text: ` (${String(t.status).replace("_", " ")})` }))));
    replace(this.slot, toggle, items);
    this.slot.hidden = false;
  }
}
