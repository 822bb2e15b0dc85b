// The Trajectory view: log-order rows (SYSTEM / USER / CONTEXT / NOTICE / ASSISTANT / TOOL / DEVELOPER,
// plus log-only events on demand), Input / Model / Tools lanes, search, kind filter and windowed rendering.

import { contentText, h, replace } from "./dom.js";
import { userKind } from "./store.js";
import { cwd } from "./toolcards/common.js";

const ROW_H = 30;
const KINDS = ["SYSTEM", "USER", "CONTEXT", "NOTICE", "ASSISTANT", "TOOL", "DEVELOPER", "LOG"];
const HIDDEN_LOG = new Set(["turn/start", "turn/end", "step/start", "step/end"]);

/**
 * Rows of a session's loaded events.
 * @param {import("./store.js").SessionStore} store
 * @param {boolean} withLog  include log-only events
 */
export function buildRows(store, withLog) {
  const rows = [];
  let turn = 0;
  let step = 0;
  let markTurn = null;
  let stepStart = null;
  const push = (row) => {
    row.turn = turn;
    row.step = step;
    if (markTurn !== null) {
      row.turnMark = markTurn;
      markTurn = null;
    }
    row.id = `row-${row.seq}${row.sub ? `-${row.sub}` : ""}`;
    rows.push(row);
  };
  for (const ev of store.events) {
    const d = ev.data || {};
    if (ev.type === "turn/start") {
      turn = d.turn;
      markTurn = d.turn;
    } else if (ev.type === "step/start") {
      step = d.step;
      stepStart = ev.time;
    }
    if (ev.type === "system/message") push({ kind: "SYSTEM", seq: ev.seq, ev, text: contentText(d.message?.content) });
    else if (ev.type === "developer/message") push({ kind: "DEVELOPER", seq: ev.seq, ev, text: contentText(d.message?.content ?? d.content) });
    else if (ev.type === "user/message") {
      const kind = userKind(d);
      const label = kind === "user" ? "USER" : kind === "context" || kind === "reference" ? "CONTEXT" : "NOTICE";
      push({ kind: label, seq: ev.seq, ev, text: contentText(d.content).slice(0, 2000), start: ev.time });
    } else if (ev.type === "assistant/message") {
      const content = d.message?.content || [];
      const text = content.filter((b) => b.type === "text").map((b) => b.text).join("");
      const reasoning = content.filter((b) => b.type === "reasoning").map((b) => b.text).join("");
      const calls = content.filter((b) => b.type === "tool-call").map((b) => b.name);
      const shown = text || reasoning || (calls.length ? `calls ${calls.join(", ")}` : "");
      push({ kind: "ASSISTANT", seq: ev.seq, ev, text: shown, start: stepStart ?? ev.time, end: ev.time, ttft: firstChunkTime(d.stream) });
    } else if (ev.type === "tool/call") {
      const entry = store.calls.get(d.callId) || {};
      const result = entry.result ? contentText(entry.result.data.message?.content).slice(0, 500) : "…";
      push({ kind: "TOOL", seq: ev.seq, ev, callId: d.callId, text: `${d.name} ${compact(d.arguments)} → ${result}`, start: ev.time, end: entry.result?.time, result: entry.result });
    } else if (withLog && !HIDDEN_LOG.has(ev.type) && !["tool/result", "assistant/attempt"].includes(ev.type)) {
      push({ kind: "LOG", seq: ev.seq, ev, text: `${ev.type} ${compact(d)}` });
    }
  }
  return rows;
}

function firstChunkTime(stream) {
  if (!Array.isArray(stream)) return undefined;
  for (const rec of stream) {
    if (rec.type === "text-chunks" || rec.type === "reasoning-chunks" || rec.type === "tool-call-chunks") return rec.time0;
    if (rec.type === "chunk" && rec.chunk?.type !== "block-start") return rec.time;
  }
  return undefined;
}

/** Row text for display: the session's directory prefix dropped, cut to 400 characters. */
function shorten(text) {
  const dir = cwd();
  return (dir ? text.split(`${dir}/`).join("") : text).slice(0, 400);
}

function compact(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return (text || "").replace(/\s+/g, " ").slice(0, 300);
}

/** The Trajectory view with its toolbar, lanes and windowed row list. */
export class TrajectoryView {
  /**
   * @param {HTMLElement} container
   * @param {{onSelect: (row: any) => void, onOpen: (row: any) => void, onClose: () => void}} ctx
   */
  constructor(container, ctx) {
    this.container = container;
    this.ctx = ctx;
    this.store = null;
    this.rows = [];
    this.visible = [];
    this.selected = null;
    this.withLog = false;
    this.query = "";
    this.kind = "";
    this.dirty = false;
    this.build();
  }

  build() {
    const search = h("input", { type: "search", class: "input small", placeholder: "Search", "aria-label": "Search trajectory" });
    search.addEventListener("input", () => {
      this.query = search.value.toLowerCase();
      this.refresh();
    });
    const kind = h("select", { class: "input small", "aria-label": "Filter by kind" }, h("option", { value: "", text: "All kinds" }), KINDS.map((k) => h("option", { value: k, text: k })));
    kind.addEventListener("change", () => {
      this.kind = kind.value;
      this.refresh();
    });
    const log = h("input", { type: "checkbox", id: "traj-log" });
    log.addEventListener("change", () => {
      this.withLog = log.checked;
      this.refresh();
    });
    this.lanes = h("div", { class: "lanes", role: "group", "aria-label": "Timeline" });
    this.spacer = h("div", { class: "traj-spacer" });
    this.list = h("div", { class: "traj-rows", role: "listbox", tabindex: "0", "aria-label": "Trajectory rows" }, this.spacer);
    this.list.addEventListener("scroll", () => this.paint());
    this.list.addEventListener("keydown", (e) => this.key(e));
    replace(
      this.container,
      h("div", { class: "traj-toolbar" }, search, kind, h("label", { class: "check" }, log, " Log events"), h("span", { class: "traj-count muted", "aria-live": "off" })),
      this.lanes,
      this.list,
    );
    this.count = this.container.querySelector(".traj-count");
  }

  /** Show a session (rebuild rows lazily when the view is visible). */
  open(store) {
    this.store = store;
    this.selected = null;
    this.refresh();
  }

  /** A new event arrived: rebuild rows on the next paint. */
  changed() {
    if (this.dirty) return;
    this.dirty = true;
    window.requestAnimationFrame(() => {
      this.dirty = false;
      if (!this.container.closest("[hidden]")) this.refresh();
    });
  }

  refresh() {
    if (!this.store) return;
    this.rows = buildRows(this.store, this.withLog);
    this.visible = this.rows.filter((r) => (!this.kind || r.kind === this.kind) && (!this.query || r.text.toLowerCase().includes(this.query) || r.kind.toLowerCase().includes(this.query)));
    this.count.textContent = `${this.visible.length} rows`;
    this.spacer.style.height = `${this.visible.length * ROW_H}px`;
    this.paintLanes();
    this.paint(true);
  }

  /** Render the rows in view (plus a margin) only. */
  paint(force = false) {
    const top = this.list.scrollTop;
    const height = this.list.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW_H) - 10);
    const last = Math.min(this.visible.length, Math.ceil((top + height) / ROW_H) + 10);
    if (!force && this.window && this.window[0] === first && this.window[1] === last) return;
    this.window = [first, last];
    const nodes = [];
    for (let i = first; i < last; i++) nodes.push(this.rowNode(this.visible[i], i));
    replace(this.spacer, nodes);
    this.list.setAttribute("aria-activedescendant", this.selected && this.list.querySelector(`#${this.selected.id}`) ? this.selected.id : "");
    if (!this.list.getAttribute("aria-activedescendant")) this.list.removeAttribute("aria-activedescendant");
  }

  rowNode(row, i) {
    const selected = this.selected?.id === row.id;
    const el = h(
      "div",
      { class: `traj-row kind-${row.kind.toLowerCase()}${selected ? " selected" : ""}`, role: "option", id: row.id, "aria-selected": String(selected), dataset: { seq: row.seq, kind: row.kind } },
      h("span", { class: "turn-mark", text: row.turnMark ? `Turn ${row.turnMark}` : "" }),
      h("span", { class: `kind-badge kind-${row.kind.toLowerCase()}`, text: row.kind }),
      h("span", { class: "row-text", text: shorten(row.text) }),
    );
    el.style.top = `${i * ROW_H}px`;
    el.addEventListener("click", () => {
      this.select(row);
      this.ctx.onOpen(row);
      this.list.focus({ preventScroll: true });
    });
    return el;
  }

  paintLanes() {
    const timed = this.rows.filter((r) => r.start !== undefined);
    if (!timed.length) {
      replace(this.lanes);
      return;
    }
    const t0 = Math.min(...timed.map((r) => r.start));
    const t1 = Math.max(...timed.map((r) => r.end ?? r.start)) + 1;
    const pct = (t) => `${(((t - t0) / (t1 - t0)) * 100).toFixed(3)}%`;
    const lane = (name, rows, cls) =>
      h(
        "div",
        { class: "lane" },
        h("span", { class: "lane-name", text: name }),
        h(
          "div",
          { class: "lane-track" },
          rows.map((r) => {
            const bar = h("button", { type: "button", class: `bar ${cls}${this.selected?.id === r.id ? " selected" : ""}`, tabindex: "-1", title: `${r.kind} ${r.text.slice(0, 60)}`, "aria-label": `${r.kind} seq ${r.seq}` });
            bar.style.left = pct(r.start);
            bar.style.width = `max(3px, calc(${pct(r.end ?? r.start)} - ${pct(r.start)}))`;
            if (r.ttft !== undefined && r.end !== undefined) {
              const tick = h("span", { class: "ttft" });
              tick.style.left = `${(((r.ttft - r.start) / Math.max(1, r.end - r.start)) * 100).toFixed(2)}%`;
              bar.append(tick);
            }
            bar.addEventListener("click", () => {
              this.select(r, true);
              this.ctx.onOpen(r);
            });
            return bar;
          }),
        ),
      );
    replace(
      this.lanes,
      lane("Input", timed.filter((r) => r.kind === "USER"), "bar-input"),
      lane("Model", timed.filter((r) => r.kind === "ASSISTANT"), "bar-model"),
      lane("Tools", timed.filter((r) => r.kind === "TOOL"), "bar-tool"),
    );
  }

  /** Select a row, scroll it into view and tell the inspector. */
  select(row, scroll = true) {
    this.selected = row;
    if (scroll) {
      const i = this.visible.findIndex((r) => r.id === row.id);
      if (i >= 0) {
        const top = i * ROW_H;
        if (top < this.list.scrollTop || top + ROW_H > this.list.scrollTop + this.list.clientHeight) this.list.scrollTop = Math.max(0, top - ROW_H * 3);
      }
    }
    this.paint(true);
    this.paintLanes();
    this.ctx.onSelect(row);
  }

  /** Select the TOOL row of a call (Inspect on a chat card). */
  selectCall(callId) {
    this.refresh();
    const row = this.visible.find((r) => r.callId === callId) || this.rows.find((r) => r.callId === callId);
    if (row) {
      this.select(row);
      this.ctx.onOpen(row);
    }
  }

  key(e) {
    const i = this.selected ? this.visible.findIndex((r) => r.id === this.selected.id) : -1;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      const next = this.visible[Math.min(this.visible.length - 1, Math.max(0, i + (e.key === "ArrowDown" ? 1 : -1)))];
      if (next) this.select(next);
    } else if (e.key === "Enter" && this.selected) {
      e.preventDefault();
      this.ctx.onOpen(this.selected);
    } else if (e.key === "Escape") {
      this.ctx.onClose();
    }
  }
}
