// The agents tree: header chip "Agents · N" opening a live tree rooted at lead, each node with its full
// name, description, status, last outcome, effective model (source on hover), tokens and elapsed time.

import { duration, h, icon, replace } from "./dom.js";

const SOURCES = { session: "from the session's own selection", descriptor: "from the spawn descriptor", "team-override": "a team override", "team-default": "the team default" };

/** Number of descendants of a node. */
export function descendants(node) {
  return (node?.children || []).reduce((n, c) => n + 1 + descendants(c), 0);
}

/** "provider/model · effort" of a node's model. */
export function modelLabel(model) {
  if (!model || !model.model) return "model unknown";
  return `${model.provider ? `${model.provider}/` : ""}${model.model}${model.effort ? ` · ${model.effort}` : ""}`;
}

/**
 * The breadcrumb trail from the tree's root (lead) down to `sessionId`: `[{name, id}]`, or null when it is absent.
 * @param {any} root
 * @param {string} sessionId
 */
export function agentTrail(root, sessionId) {
  const walk = (node, trail) => {
    const name = trail.length ? (node.name || node.sessionId.slice(0, 8)).split("/").pop() : "lead";
    const here = [...trail, { name, id: node.sessionId }];
    if (node.sessionId === sessionId) return here;
    for (const child of node.children || []) {
      const found = walk(child, here);
      if (found) return found;
    }
    return null;
  };
  return walk(root, []);
}

/** The header chip and its popover. */
export class AgentsChip {
  /**
   * @param {HTMLElement} slot
   * @param {{openSession: (id: string, path: {name: string, id: string}[] | null) => void}} ctx
   */
  constructor(slot, ctx) {
    this.slot = slot;
    this.ctx = ctx;
    this.root = null;
    this.chip = h("button", { type: "button", class: "chip-btn agents-chip", "aria-expanded": "false", "aria-controls": "agents-popover", hidden: true });
    this.popover = h("div", { id: "agents-popover", class: "popover agents-popover", role: "dialog", "aria-label": "Agents", hidden: true });
    this.chip.addEventListener("click", () => this.toggle());
    this.popover.addEventListener("keydown", (e) => this.key(e));
    document.addEventListener("click", (e) => {
      if (!this.popover.hidden && !this.slot.contains(/** @type {Node} */ (e.target))) this.close(false);
    });
    replace(this.slot, this.chip, this.popover);
  }

  /** Take a new tree ({root: AgentNode}). */
  update(tree) {
    this.root = tree?.root || null;
    const n = descendants(this.root);
    this.chip.hidden = n === 0;
    replace(this.chip, icon("agents"), `Agents · ${n}`);
    if (!this.popover.hidden) this.paint();
  }

  toggle() {
    if (this.popover.hidden) this.openPopover();
    else this.close(true);
  }

  openPopover() {
    this.paint();
    this.popover.hidden = false;
    this.chip.setAttribute("aria-expanded", "true");
    this.popover.querySelector(".agent-node")?.focus();
  }

  close(refocus) {
    this.popover.hidden = true;
    this.chip.setAttribute("aria-expanded", "false");
    if (refocus) this.chip.focus();
  }

  paint() {
    if (!this.root) return;
    const now = Date.now();
    const node = (n, depth, trail) => {
      const label = n.name || n.sessionId.slice(0, 8);
      const here = [...trail, { name: depth === 0 ? "lead" : label.split("/").pop(), id: n.sessionId }];
      const status = n.status || "idle";
      const button = h(
        "button",
        { type: "button", class: "agent-node", dataset: { sessionId: n.sessionId, name: label } },
        h("span", { class: `agent-status status-${status}`, "aria-hidden": "true" }),
        h("span", { class: "agent-main" }, h("span", { class: "agent-name", text: label }), n.label ? h("span", { class: "agent-desc", text: n.label }) : null),
        h("span", { class: "agent-meta" }, h("span", { class: "agent-state", text: `${status}${n.outcome ? ` · ${n.outcome}` : ""}` }), h("span", { class: "agent-model", title: `Model ${modelLabel(n.model)}: ${SOURCES[n.model?.source] || "source unknown"}`, text: modelLabel(n.model) }), h("span", { class: "agent-tokens", text: `${n.tokens || 0} tok${n.startedAt ? ` · ${duration(Math.max(0, now - n.startedAt))}` : ""}` })),
      );
      button.style.setProperty("--depth", String(depth));
      button.addEventListener("click", () => {
        this.close(false);
        this.ctx.openSession(n.sessionId, depth === 0 ? null : here);
      });
      return [h("li", null, button), ...(n.children || []).flatMap((c) => node(c, depth + 1, here))];
    };
    const rootNode = { ...this.root, name: "lead" };
    replace(this.popover, h("h2", { class: "popover-title", text: "Agents" }), h("ul", { class: "agent-tree" }, node(rootNode, 0, [])));
  }

  key(e) {
    const nodes = [...this.popover.querySelectorAll(".agent-node")];
    const i = nodes.indexOf(/** @type {HTMLElement} */ (document.activeElement));
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      nodes[(i + (e.key === "ArrowDown" ? 1 : nodes.length - 1)) % nodes.length]?.focus();
    } else if (e.key === "Escape") {
      e.preventDefault();
      this.close(true);
    }
  }
}
