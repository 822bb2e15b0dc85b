// The approval card above the composer: reason, tool, call preview, Reject / Allow once; one at a time.

import { api } from "./api.js";
import { announce, h, icon, parseArgs, replace } from "./dom.js";

/** Renders the first waiting approval of the open session into `slot`. */
export class ApprovalCard {
  /**
   * @param {HTMLElement} slot
   * @param {{sessionId: () => string | null, notify: (message: string) => void}} ctx
   */
  constructor(slot, ctx) {
    this.slot = slot;
    this.ctx = ctx;
    this.announced = new Set();
    this.shownId = null;
  }

  /** Show the pending approvals (whole value). */
  render(approvals) {
    if (!approvals.length) {
      this.shownId = null;
      replace(this.slot);
      this.slot.hidden = true;
      return;
    }
    const a = approvals[0];
    if (this.shownId === a.approvalId && this.count === approvals.length) return;
    const hadFocus = this.slot.contains(document.activeElement);
    this.shownId = a.approvalId;
    this.count = approvals.length;
    const args = parseArgs(a.arguments);
    const preview = args.command || args.file_path || args.path || (a.arguments ? JSON.stringify(args) : "");
    const decide = async (outcome, button) => {
      for (const b of this.slot.querySelectorAll("button")) b.disabled = true;
      try {
        await api.approve(this.ctx.sessionId(), a.approvalId, outcome);
      } catch (err) {
        this.ctx.notify(err.status === 409 ? "This approval was already decided." : err.message);
        button.disabled = false;
      }
    };
    const reject = h("button", { type: "button", class: "btn", text: "Reject" });
    reject.addEventListener("click", () => decide("rejected", reject));
    const allow = h("button", { type: "button", class: "btn primary", text: "Allow once" });
    allow.addEventListener("click", () => decide("allowed-once", allow));
    const titleId = `approval-title-${a.approvalId}`;
    replace(
      this.slot,
      h(
        "section",
        { class: "card approval-card", "aria-labelledby": titleId, dataset: { approvalId: a.approvalId } },
        h("header", { class: "card-head warn" }, icon("shield"), h("h2", { id: titleId, class: "card-title", text: "Waiting for approval" }), approvals.length > 1 ? h("span", { class: "muted", text: `1 of ${approvals.length}` }) : null),
        h("div", { class: "card-body" }, h("p", { class: "approval-reason", text: a.reason || `Allow ${a.toolName}?` }), h("p", { class: "approval-tool muted", text: `Tool: ${a.toolName}` }), preview ? h("pre", { class: "approval-preview", text: preview }) : null),
        h("div", { class: "card-actions" }, reject, allow),
      ),
    );
    this.slot.hidden = false;
    if (hadFocus) allow.focus();
    if (!this.announced.has(a.approvalId)) {
      this.announced.add(a.approvalId);
      announce(`Waiting for approval: ${a.reason || a.toolName}`, true);
    }
  }
}
