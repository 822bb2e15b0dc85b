// The Trajectory inspector: Summary / Payload / Result / Schema / Timing / Raw tabs for a selected row.

import { contentText, copyButton, duration, h, icon, parseArgs, prettyJson, replace } from "./dom.js";

const TABS = ["Summary", "Payload", "Result", "Schema", "Timing", "Raw"];

/** The inspector panel (a complementary landmark beside the rows). */
export class Inspector {
  /**
   * @param {HTMLElement} aside
   * @param {{store: () => import("./store.js").SessionStore | null, onClose: () => void}} ctx
   */
  constructor(aside, ctx) {
    this.aside = aside;
    this.ctx = ctx;
    this.row = null;
    this.tab = "Summary";
  }

  /** Show a row (opens the panel). */
  show(row) {
    this.row = row;
    this.aside.hidden = false;
    this.render();
  }

  /** Update the shown row if the panel is open. */
  follow(row) {
    if (!this.aside.hidden) this.show(row);
  }

  hide() {
    this.aside.hidden = true;
  }

  render() {
    const row = this.row;
    const close = h("button", { type: "button", class: "icon-btn", "aria-label": "Close inspector" }, icon("close"));
    close.addEventListener("click", () => this.ctx.onClose());
    const tablist = h("div", { class: "tabs small", role: "tablist", "aria-label": "Inspector" });
    const panel = h("div", { class: "inspector-panel", role: "tabpanel", id: "inspector-panel", tabindex: "0" });
    TABS.forEach((name) => {
      const selected = name === this.tab;
      const tab = h("button", { type: "button", role: "tab", id: `insp-tab-${name}`, class: "tab", "aria-selected": String(selected), "aria-controls": "inspector-panel", tabindex: selected ? "0" : "-1", text: name });
      tab.addEventListener("click", () => {
        this.tab = name;
        this.render();
        this.aside.querySelector(`#insp-tab-${name}`)?.focus();
      });
      tab.addEventListener("keydown", (e) => {
        if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
        const k = (TABS.indexOf(name) + (e.key === "ArrowRight" ? 1 : TABS.length - 1)) % TABS.length;
        this.tab = TABS[k];
        this.render();
        this.aside.querySelector(`#insp-tab-${TABS[k]}`)?.focus();
      });
      tablist.append(tab);
    });
    panel.setAttribute("aria-labelledby", `insp-tab-${this.tab}`);
    const sections = this.sections(row);
    for (const [label, value] of sections) {
      const text = typeof value === "string" ? value : prettyJson(value);
      panel.append(h("div", { class: "insp-section" }, h("div", { class: "insp-label" }, h("span", { text: label }), copyButton(() => text, `Copy ${label}`)), h("pre", { class: "insp-pre", text })));
    }
    replace(
      this.aside,
      h("div", { class: "inspector-head" }, h("span", { class: `kind-badge kind-${row.kind.toLowerCase()}`, text: row.kind }), h("span", { class: "muted", text: `Turn ${row.turn} · Step ${row.step}` }), close),
      tablist,
      panel,
    );
  }

  /** The [label, value] sections of the current tab. */
  sections(row) {
    const ev = row.ev;
    const d = ev.data || {};
    const store = this.ctx.store();
    switch (this.tab) {
      case "Summary": {
        const status = row.kind === "TOOL" ? (!row.result ? "running" : row.result.data.message?.isError ? "error" : "completed") : "completed";
        const out = [["Kind", `${row.kind} (${ev.type})`], ["Position", `Turn ${row.turn} · Step ${row.step} · seq ${ev.seq}`], ["Status", status]];
        if (row.kind === "TOOL") {
          const issuer = store?.events.find((e) => e.type === "assistant/message" && (e.data.message?.content || []).some((b) => b.type === "tool-call" && b.id === row.callId));
          if (issuer) out.push(["Issued by", contentText(issuer.data.message.content) || `assistant message seq ${issuer.seq}`]);
        }
        return out;
      }
      case "Payload":
        if (row.kind === "TOOL") return [["Arguments", prettyJson(parseArgs(d.arguments))]];
        if (d.message) return [["Content", d.message.content]];
        if (d.content) return [["Content", d.content]];
        return [["Data", d]];
      case "Result":
        if (row.kind !== "TOOL") return [["Result", "No result: this row is not a tool call."]];
        if (!row.result) return [["Result", "Still running."]];
        return [
          ["Content", contentText(row.result.data.message?.content)],
          ["Meta", row.result.data.meta ?? {}],
          ["Error", row.result.data.message?.isError ? "yes" : "no"],
        ];
      case "Schema": {
        const header = store?.headerAt(ev.seq);
        if (row.kind === "TOOL") {
          const schema = (header?.tools || []).find((t) => t.name === d.name);
          return schema ? [["Tool", schema.name], ["Description", schema.description || ""], ["Parameters", schema.parameters || {}]] : [["Schema", "No schema was offered for this tool in this step."]];
        }
        if (row.kind === "ASSISTANT") {
          const src = d.message?.source || {};
          const cfg = header?.config || {};
          return [["Provider", src.provider || cfg.provider || "—"], ["Model", src.model || cfg.model || "—"], ["Effort", cfg.reasoningEffort || cfg.effort || "—"]];
        }
        return [["Schema", "No schema for this row."]];
      }
      case "Timing": {
        const out = [["Started", new Date(row.start ?? ev.time).toISOString()]];
        if (row.end !== undefined && row.start !== undefined) out.push(["Duration", row.end - row.start < 1000 ? `${row.end - row.start} ms` : `${row.end - row.start} ms (${duration(row.end - row.start)})`]);
        if (row.ttft !== undefined && row.start !== undefined) out.push(["Time to first token", `${row.ttft - row.start} ms`]);
        if (d.usage) out.push(["Usage", d.usage]);
        return out;
      }
      default: {
        const raw = [ev];
        if (row.result) raw.push(row.result);
        const out = raw.map((e) => [`Event seq ${e.seq}`, e]);
        if (d.streamElided) out.unshift(["Note", "This long answer's stream record is shown without its texts, which repeat the message; Download log has the event as written."]);
        return out;
      }
    }
  }
}
