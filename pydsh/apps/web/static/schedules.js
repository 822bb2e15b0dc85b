// The reminders bar above the composer: the session's active reminders (the "schedules" projection),
// expandable to the list with each one's rule and next time; a reminder is cancelled by sending
// "/schedule delete ID", the same command a person can type. Hidden when the session has none.

import { h, icon, replace } from "./dom.js";

/** A reminder's rule in a few words. */
export function ruleText(r) {
  if (r.kind === "after" || r.kind === "at") return "once";
  if (r.kind === "every") return `every ${r.everySeconds}s`;
  if (r.kind === "daily") return `daily ${r.time.slice(0, 5)} ${r.timeZone}`;
  if (r.kind === "weekly") return `weekly ${r.weekdays.join(",")} ${r.time.slice(0, 5)} ${r.timeZone}`;
  return `cron ${r.expression} ${r.timeZone}`;
}

/** The reminders bar. */
export class SchedulesBar {
  /**
   * @param {HTMLElement} slot
   * @param {{cancel: (id: string) => void}} ctx
   */
  constructor(slot, ctx) {
    this.slot = slot;
    this.ctx = ctx;
    this.open = false;
  }

  /** @param {Array<{id: string, kind: string, title: string, scheduledAt: string}> | null | undefined} list */
  render(list) {
    const items = Array.isArray(list) ? list : [];
    if (!items.length) {
      replace(this.slot);
      this.slot.hidden = true;
      return;
    }
    const next = items[0];
    const when = (r) => new Date(r.scheduledAt).toLocaleString();
    const toggle = h("button", { type: "button", class: "schedules-toggle", "aria-expanded": String(this.open), "aria-controls": "schedules-list" }, icon("clock"), h("span", { class: "schedules-label", text: "Reminders" }), h("span", { class: "schedules-count", text: String(items.length) }), h("span", { class: "schedules-next", text: `· next: ${next.title}, ${when(next)}` }));
    toggle.addEventListener("click", () => {
      this.open = !this.open;
      this.render(items);
      this.slot.querySelector(".schedules-toggle")?.focus();
    });
    const rows = items.map((r) => {
      const cancel = h("button", { type: "button", class: "btn small", text: "Cancel", "aria-label": `Cancel reminder ${r.title}` });
      cancel.addEventListener("click", () => this.ctx.cancel(r.id));
      return h("li", { class: "schedule-row", "data-id": r.id }, h("span", { class: "schedule-title", text: r.title }), h("span", { class: "schedule-rule muted", text: `${ruleText(r)} · ${when(r)}` }), cancel);
    });
    replace(this.slot, toggle, h("ul", { id: "schedules-list", class: "schedule-list", hidden: !this.open }, rows));
    this.slot.hidden = false;
  }
}
