// The Chat view: a fold of the session log plus live assistant-stream frames into bubbles, work-detail
// groups with tool cards, answers, notices, message cards and turn-end rows.

import { announce, append, clock, contentText, copyButton, duration, h, icon, replace } from "./dom.js";
import { messageImages } from "./images.js";
import { MarkdownView } from "./mdstream.js";
import { messageCard } from "./messages.js";
import { userKind } from "./store.js";
import { setDeliveries } from "./toolcards/agent.js";
import { setCwd } from "./toolcards/common.js";
import { tally, toolCard } from "./toolcards/index.js";

/** Work items per chunk: chunks off screen skip style, layout and paint, and a frame lays out only the few new
 * ones near the screen (chunks of 50 made every new chunk a full layout), so a turn of 1,500 calls stays cheap. */
const CHUNK_ITEMS = 10;
const OUTCOME_LINES = { "allowed-once": "Allowed once", rejected: "Rejected", cancelled: "Approval cancelled", unavailable: "Approval unavailable" };

/** One turn's DOM and counters. */
class TurnView {
  constructor(chat, turn, startTime) {
    this.chat = chat;
    this.turn = turn;
    this.startTime = startTime;
    this.endTime = null;
    this.running = true;
    this.counts = {};
    this.usage = 0;
    this.answers = [];
    this.el = h("section", { class: "turn", dataset: { turn }, "aria-label": `Turn ${turn}` });
    this.work = null;
  }

  /** The work-details group, created at its first item. */
  group() {
    if (this.work) return this.work;
    const title = h("span", { class: "work-title" });
    const summary = h("span", { class: "work-summary" });
    const toggle = h("button", { type: "button", class: "work-toggle", "aria-expanded": "true" }, icon("chevron"), title, summary);
    const items = h("div", { class: "work-items" });
    const stop = h("button", { type: "button", class: "btn small stop-btn", hidden: !this.running }, icon("stop"), "Stop");
    stop.addEventListener("click", () => this.chat.ctx.onStop());
    toggle.addEventListener("click", () => this.expand(toggle.getAttribute("aria-expanded") !== "true"));
    const el = h("div", { class: "work" }, h("div", { class: "work-head" }, toggle, stop), items);
    this.el.append(el);
    this.work = { el, toggle, title, summary, items, stop, chunk: null, count: 0 };
    this.refresh();
    return this.work;
  }

  /** Add a reasoning item, tool card, notice or intermediate answer to the work group. */
  addItem(node) {
    const work = this.group();
    if (!work.chunk || work.count % CHUNK_ITEMS === 0) {
      work.chunk = h("div", { class: "work-chunk" });
      work.items.append(work.chunk);
    }
    work.count++;
    work.chunk.append(node);
  }

  expand(open) {
    if (!this.work) return;
    this.work.toggle.setAttribute("aria-expanded", String(open));
    this.work.items.classList.toggle("folded", !open);
  }

  /** Update the group title: "Working for Ns" while running, then the outcome and a summary. */
  refresh(now = Date.now()) {
    if (!this.work) return;
    const { title, summary, stop } = this.work;
    if (this.running) {
      title.textContent = `Working for ${Math.max(0, Math.round((now - this.startTime) / 1000))}s`;
    } else {
      title.textContent = this.outcome || `Completed in ${duration(Math.max(0, (this.endTime || now) - this.startTime))}`;
    }
    stop.hidden = !this.running;
    summary.textContent = this.summaryText();
  }

  summaryText() {
    const parts = [];
    const n = (k) => this.counts[k] || 0;
    if (n("read")) parts.push(`read ${n("read")} ${n("read") === 1 ? "file" : "files"}`);
    if (n("ran")) parts.push(`ran ${n("ran")} ${n("ran") === 1 ? "command" : "commands"}`);
    if (n("edited")) parts.push(`edited ${n("edited")} ${n("edited") === 1 ? "file" : "files"}`);
    if (n("delegated")) parts.push(`delegated ${n("delegated")} ${n("delegated") === 1 ? "task" : "tasks"}`);
    if (n("searched")) parts.push(`searched ${n("searched")} ${n("searched") === 1 ? "time" : "times"}`);
    if (n("used")) parts.push(`used ${n("used")} ${n("used") === 1 ? "tool" : "tools"}`);
    if (!parts.length) return "";
    const text = parts.join(", ");
    return ` · ${text[0].toUpperCase()}${text.slice(1)}`;
  }
}

/** The Chat view of one open session. */
export class ChatView {
  /**
   * @param {HTMLElement} container
   * @param {{onInspect: (callId: string) => void, onStop: () => void, openSession: (id: string) => void,
   *   openSettings: (tab?: string) => void, collapse: () => boolean, loadEarlier: () => void}} ctx
   */
  constructor(container, ctx) {
    this.container = container;
    this.ctx = ctx;
    this.store = null;
    this.turns = new Map();
    this.cards = new Map();
    this.live = new Map();
    this.approvals = new Map();
    this.current = null;
    this.pendingFrames = new Set();
    this.rafScheduled = false;
    window.setInterval(() => this.tick(), 1000);
  }

  /** Render a session from scratch: every loaded event in order. */
  open(store) {
    this.store = store;
    setCwd(store.header?.cwd || store.summary?.cwd);
    this.turns.clear();
    this.cards.clear();
    this.live.clear();
    this.approvals.clear();
    this.current = null;
    this.loose = null;
    const list = h("div", { class: "chat-list" });
    this.list = list;
    const earlier = h("button", { type: "button", class: "btn small load-earlier", hidden: !store.hasMore, text: "Load earlier" });
    earlier.addEventListener("click", () => this.ctx.loadEarlier());
    replace(this.container, earlier, list);
    for (const ev of store.events) this.apply(ev, false);
    if (store.status !== "running" && this.current) this.current.running = false;
    for (const view of this.turns.values()) view.refresh();
    if (!store.events.length) list.append(h("p", { class: "empty-note muted", text: "No messages yet." }));
  }

  /** Fold one event into the DOM; `live` marks events arriving from the stream. */
  apply(ev, live = true) {
    const d = ev.data || {};
    switch (ev.type) {
      case "turn/start":
        this.startTurn(d.turn, ev.time);
        break;
      case "user/message":
        this.userMessage(ev);
        break;
      case "assistant/message":
        this.assistantMessage(ev);
        break;
      case "assistant/attempt":
        this.dropLive(d.turn, d.step);
        break;
      case "tool/call":
        this.toolCall(ev);
        break;
      case "tool/result":
        this.toolResult(ev);
        break;
      case "approval/asked":
        this.approvals.set(d.id, d);
        break;
      case "approval/decided":
        this.approvalDecided(d);
        break;
      case "llm/retry":
        this.notice(`Retrying (${d.retry}/${d.maxRetries ?? 5})…`, d.failure?.message, `retry-${d.retryId}-${d.retry}`);
        break;
      case "llm/retry-started":
        this.retryStarted(d);
        break;
      case "compaction/end":
      case "compaction/summary":
        this.notice("Context compacted", null);
        break;
      case "turn/end":
        this.endTurn(ev, live);
        break;
      default:
        break;
    }
  }

  turnView(turn) {
    if (turn !== undefined && this.turns.has(turn)) return this.turns.get(turn);
    if (this.current) return this.current;
    if (!this.loose) {
      this.loose = new TurnView(this, 0, 0);
      this.loose.running = false;
      this.list.append(this.loose.el);
    }
    return this.loose;
  }

  startTurn(turn, time) {
    this.list.querySelector(".empty-note")?.remove();
    const view = new TurnView(this, turn, time);
    this.turns.set(turn, view);
    this.current = view;
    this.list.append(view.el);
  }

  userMessage(ev) {
    const message = ev.data;
    const kind = userKind(message);
    const view = this.turnView();
    if (kind === "context") return;
    if (kind === "user") {
      const text = contentText(message.content);
      view.el.append(
        h(
          "div",
          { class: "user-msg", dataset: { seq: ev.seq } },
          text ? h("div", { class: "bubble", text }) : null,
          messageImages(message.content),
          h("div", { class: "msg-meta" }, h("time", { text: clock(ev.time) }), copyButton(() => text, "Copy message")),
        ),
      );
      return;
    }
    if (kind === "message") {
      view.el.append(messageCard(message, ev, this.ctx.openSession));
      return;
    }
    if (kind === "reference") {
      view.el.append(referenceRow(message));
      return;
    }
    const source = message.source || {};
    const title = source.kind === "goal" && source.round > 0 ? `Goal · Round ${source.round}` : `Notice · ${source.kind || "notice"}`;
    this.noticeRow(view, title, contentText(message.content));
  }

  /** A one-line expandable notice row in the turn's group. */
  noticeRow(view, title, text) {
    const row = h("details", { class: "notice-row" }, h("summary", null, icon("info"), title));
    if (text) row.append(h("pre", { class: "notice-text", text }));
    view.addItem(row);
  }

  notice(title, detail, key) {
    const view = this.turnView();
    const row = h("div", { class: "work-line", dataset: key ? { key } : null }, icon("info"), h("span", { text: title }), detail ? h("span", { class: "muted", text: ` — ${detail}` }) : null);
    view.addItem(row);
  }

  retryStarted(d) {
    for (const row of this.container.querySelectorAll(`[data-key="retry-${CSS.escape(d.retryId)}-${d.retry}"] span:first-of-type`)) {
      row.textContent = `Retried (${d.retry}/5)`;
    }
  }

  assistantMessage(ev) {
    const d = ev.data;
    const content = d.message?.content || [];
    const text = content.filter((b) => b.type === "text").map((b) => b.text).join("");
    const streamed = this.adoptLive(d.turn, d.step, text);
    this.dropLive(d.turn, d.step);
    const view = this.turnView(d.turn);
    const hasCalls = content.some((b) => b.type === "tool-call");
    for (const block of content) {
      if (block.type === "reasoning" && block.text) view.addItem(thinkItem(block.text));
    }
    if (text) {
      const node = streamed || answerNode(text);
      node.dataset.seq = String(ev.seq);
      if (hasCalls) view.addItem(node);
      else {
        // A streamed answer already last in its turn stays put: moving a 5 MB answer's subtree costs seconds.
        if (node !== view.el.lastElementChild) view.el.append(node);
        view.answers.push(text);
      }
    }
    const u = d.usage;
    if (u) view.usage += (u.inputTokens || 0) + (u.cacheReadTokens || 0) + (u.cacheWriteTokens || 0) + (u.outputTokens || 0);
  }

  toolCall(ev) {
    const view = this.turnView(ev.data.turn);
    const entry = this.store.calls.get(ev.data.callId);
    const card = toolCard(ev, entry?.result || null, { onInspect: this.ctx.onInspect });
    this.cards.set(ev.data.callId, card);
    const verb = tally(ev.data.name);
    view.counts[verb] = (view.counts[verb] || 0) + 1;
    view.addItem(card.el);
    view.refresh();
  }

  toolResult(ev) {
    const id = ev.data.message?.toolCallId || ev.data.message?.source?.callId;
    this.cards.get(id)?.update(ev);
  }

  approvalDecided(d) {
    const asked = this.approvals.get(d.id);
    const line = OUTCOME_LINES[d.outcome] || d.outcome;
    this.notice(`${line}${asked?.toolName ? ` · ${asked.toolName}` : ""}`, null);
  }

  endTurn(ev, live) {
    const d = ev.data;
    const view = this.turns.get(d.turn) || this.current;
    if (!view) return;
    view.running = false;
    view.endTime = ev.time;
    const reason = d.reason || {};
    let errorRow = null;
    if (reason.kind === "aborted") view.outcome = "Stopped";
    else if (reason.kind === "error") {
      const err = reason.error || {};
      view.outcome = `Failed — ${err.message || "unknown error"}`;
      errorRow = h("div", { class: "turn-error", role: "note" }, icon("alert"), h("span", { text: `${err.message || "The turn failed."}${err.code ? ` (${err.code})` : ""}` }));
      if (err.code === "MISSING_CREDENTIAL" || err.code === "AUTH") {
        const link = h("button", { type: "button", class: "link-btn", text: "Open Settings → Models" });
        link.addEventListener("click", () => this.ctx.openSettings("models"));
        errorRow.append(" ", link);
      }
    } else if (reason.kind === "max-tokens") view.outcome = `Stopped at the output limit after ${duration(ev.time - view.startTime)}`;
    else if (reason.kind === "blocked") view.outcome = "Blocked";
    for (const key of [...this.live.keys()]) if (key.startsWith(`${d.turn}:`)) this.dropLive(d.turn, Number(key.split(":")[1]));
    if (view.work && this.ctx.collapse()) view.expand(false);
    view.refresh();
    const answers = view.answers.join("\n\n");
    // Without a work group nothing else says a turn did not complete (a stopped text-only answer).
    const outcomeRow = !view.work && !errorRow && view.outcome ? h("div", { class: "turn-outcome", role: "note" }, icon("stop"), h("span", { text: view.outcome })) : null;
    append(view.el, [
      errorRow,
      outcomeRow,
      h(
        "div",
        { class: "turn-end" },
        copyButton(() => answers, "Copy answer"),
        h("span", { class: "turn-usage" }, icon("database"), `${view.usage} tok`),
        h("time", { text: clock(ev.time) }),
      ),
    ]);
    if (this.current === view) this.current = null;
    if (live) announce(view.outcome ? `Turn ${view.outcome.toLowerCase()}` : "Turn completed");
  }

  /** An assistant-stream frame: live text and reasoning for the attempt in flight. */
  stream(frame) {
    const key = `${frame.turn}:${frame.step}`;
    if (frame.type === "start") {
      const old = this.live.get(key);
      if (old) this.removeLive(old);
      this.live.set(key, { attemptId: frame.attemptId, text: "", reasoning: "", unshown: "", node: null, view: null, think: null });
      return;
    }
    const entry = this.live.get(key);
    if (!entry || (frame.attemptId && entry.attemptId !== frame.attemptId)) return;
    if (frame.type === "end") {
      if (frame.outcome?.kind === "abandoned" || frame.outcome?.eventType === "assistant/attempt") this.dropLive(frame.turn, frame.step);
      return;
    }
    const chunk = frame.chunk || {};
    if (chunk.type === "text-delta") this.liveText(entry, frame.turn, chunk.text);
    else if (chunk.type === "reasoning-delta") {
      entry.reasoning += chunk.text;
      entry.unshown += chunk.text;
    } else return;
    this.pendingFrames.add(key);
    if (!this.rafScheduled) {
      this.rafScheduled = true;
      window.requestAnimationFrame(() => this.flushLive());
    }
  }

  /** Streamed answer text: its node renders block by block on animation frames (mdstream.js). */
  liveText(entry, turn, delta) {
    entry.text += delta;
    if (!entry.node) {
      const node = h("div", { class: "answer markdown streaming", "aria-busy": "true" });
      entry.node = node;
      entry.view = new MarkdownView(node, () => rendered(node));
      this.turnView(turn).el.append(node);
    }
    entry.view.append(delta);
  }

  /** Streamed reasoning, once per frame: only the text that arrived since the last frame is added. */
  flushLive() {
    this.rafScheduled = false;
    for (const key of this.pendingFrames) {
      const entry = this.live.get(key);
      if (!entry || !entry.unshown) continue;
      if (!entry.think) {
        entry.think = thinkItem(entry.unshown, true);
        this.turnView(Number(key.split(":")[0])).addItem(entry.think);
      } else entry.think.querySelector(".think-text").append(entry.unshown);
      entry.unshown = "";
    }
    this.pendingFrames.clear();
  }

  /** The streamed node of a committed answer when it streamed that text (trailing blanks aside, which
   * render as nothing): it finishes rendering in place, with no second render and no flicker; else null. */
  adoptLive(turn, step, text) {
    const entry = this.live.get(`${turn}:${step}`);
    if (!entry?.node || !text || entry.text.trimEnd() !== text.trimEnd()) return null;
    const node = entry.node;
    entry.view.end();
    entry.node = null;
    entry.view = null;
    return node;
  }

  dropLive(turn, step) {
    const key = `${turn}:${step}`;
    const entry = this.live.get(key);
    if (entry) this.removeLive(entry);
    this.live.delete(key);
    this.pendingFrames.delete(key);
  }

  removeLive(entry) {
    entry.view?.stop();
    entry.node?.remove();
    entry.think?.remove();
  }

  /** Pushed delivery states of cross-session messages (none: settings changed): repaint the send cards. */
  deliveries(list) {
    if (list) setDeliveries(list);
    for (const [callId, card] of this.cards) {
      const entry = this.store?.calls.get(callId);
      if (entry?.call?.data.name === "send_agent_message") card.update(entry.result || null);
    }
  }

  /** Select a call's card (used after reload of a pending approval). */
  card(callId) {
    return this.cards.get(callId);
  }

  tick() {
    const now = Date.now();
    for (const view of this.turns.values()) if (view.running) view.refresh(now);
  }

  /** Mark the open turn as no longer running (status frame idle without a turn end). */
  settle() {
    if (this.current) {
      this.current.running = false;
      this.current.refresh();
    }
  }
}

/** A session reference under the prompt: which session the agent got a read-only snapshot of, expandable. */
function referenceRow(message) {
  const title = message.source?.title || message.source?.sessionId || "another session";
  return h(
    "details",
    { class: "reference-row", dataset: { sessionId: message.source?.sessionId || "" } },
    h("summary", null, icon("message"), h("span", { text: `Referenced session · ${title}` }), h("span", { class: "muted", text: " — a read-only snapshot for the agent" })),
    h("pre", { class: "notice-text", text: contentText(message.content) }),
  );
}

/** A committed answer's node, rendered block by block; marked busy while a long one takes several frames. */
function answerNode(text) {
  const node = h("div", { class: "answer markdown streaming", "aria-busy": "true" });
  new MarkdownView(node, () => rendered(node)).render(text);
  return node;
}

/** An answer node whose text is all rendered. */
function rendered(node) {
  node.classList.remove("streaming");
  node.removeAttribute("aria-busy");
}

/** A reasoning item: "Think · <first line>", expandable to the full text. */
function thinkItem(text, live = false) {
  const first = text.split("\n").find((l) => l.trim()) || "";
  const short = first.length > 100 ? `${first.slice(0, 100)}…` : first;
  return h(
    "details",
    { class: `think${live ? " streaming" : ""}` },
    h("summary", null, icon("brain"), h("span", { class: "think-label", text: "Think" }), h("span", { class: "think-first", text: ` · ${short}` })),
    h("div", { class: "think-text", text }),
  );
}
