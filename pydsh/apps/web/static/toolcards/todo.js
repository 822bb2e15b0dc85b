// `todo_write`: "Updated the plan"; expanded, the list with its states.

import { h } from "../dom.js";

const MARK = { completed: "✓", in_progress: "▸", pending: "○" };

export function summary() {
  return "Updated the plan";
}

export function body(args) {
  const todos = Array.isArray(args.todos) ? args.todos : [];
  return h(
    "ul",
    { class: "todo-list" },
    todos.map((t) => h("li", { class: `todo-${t.status}` }, h("span", { class: "todo-mark", "aria-hidden": "true", text: MARK[t.status] || "○" }), `${t.content} `, h("span", { class: "muted", text: `(${String(t.status).replace("_", " ")})` }))),
  );
}
