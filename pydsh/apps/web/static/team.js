// Optional Team panel (Agent Teams): members with role, status and effective model, and a read-only task
// board in columns pending / in progress / completed. Loaded with import() inside its own error boundary.

import { api } from "./api.js";
import { h, replace } from "./dom.js";
import { modelLabel } from "./agents.js";

const COLUMNS = [["pending", "Pending"], ["in_progress", "In progress"], ["completed", "Completed"]];
const SOURCES = { descriptor: "spawn descriptor", "team-override": "team override", "team-default": "team default", session: "session" };

/**
 * Mount the panel; returns the hooks the page calls when the session or its team changes.
 * @param {HTMLElement} slot
 * @returns {{session: (store: any) => Promise<void>, team: (value: any) => void}}
 */
export function mount(slot) {
  slot.hidden = true;
  const render = (team) => {
    if (!team) {
      replace(slot);
      slot.hidden = true;
      return;
    }
    slot.hidden = false;
    const members = team.members || [];
    const tasks = team.tasks || [];
    replace(
      slot,
      h("h2", { class: "panel-title", text: "Team" }),
      h(
        "ul",
        { class: "team-members" },
        members.map((m) =>
          h(
            "li",
            { class: "team-member", dataset: { name: m.name || m.target || "" } },
            h("span", { class: "member-name", text: m.name || m.target }),
            h("span", { class: "muted", text: ` ${m.role || "teammate"} · ${m.status || "idle"}` }),
            h("span", { class: "agent-model", title: `source: ${SOURCES[m.model?.source] || m.model?.source || "unknown"}`, text: modelLabel(m.model) }),
          ),
        ),
      ),
      h(
        "div",
        { class: "task-board" },
        COLUMNS.map(([status, label]) => {
          const column = tasks.filter((t) => (t.status || "pending").replace("-", "_") === status);
          return h(
            "section",
            { class: "task-column", dataset: { status }, "aria-label": `${label} tasks` },
            h("h3", { text: `${label} (${column.length})` }),
            column.map((t) =>
              h(
                "article",
                { class: "task-card", dataset: { taskId: t.id } },
                h("div", { class: "task-subject", text: `#${t.id} ${t.subject || ""}` }),
                h("div", { class: "muted", text: [t.owner ? `owner ${t.owner}` : "unowned", t.blockedBy?.length ? `blocked by ${t.blockedBy.join(", ")}` : null, t.ready ? "ready" : null, t.writeScopes?.length ? `writes ${t.writeScopes.join(", ")}` : null, t.revision !== undefined ? `rev ${t.revision}` : null].filter(Boolean).join(" · ") }),
              ),
            ),
          );
        }),
      ),
    );
  };
  return {
    async session(store) {
      render(null);
      if (!store || store.isMember()) return;
      try {
        render(await api.team(store.id));
      } catch (err) {
        if (err.status !== 404) throw err;
      }
    },
    team: render,
  };
}
