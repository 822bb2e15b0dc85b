// Client state: the index (sessions, workspaces) and one open session folded from its log and live frames.

/** A minimal event emitter. */
export class Emitter {
  constructor() {
    /** @type {Map<string, Set<Function>>} */
    this.listeners = new Map();
  }

  /** Subscribe; returns an unsubscribe function. */
  on(name, fn) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(fn);
    return () => this.listeners.get(name)?.delete(fn);
  }

  emit(name, ...args) {
    for (const fn of this.listeners.get(name) || []) fn(...args);
  }
}

/** Context sources hidden in Chat and shown as CONTEXT rows in Trajectory. */
export const CONTEXT_KINDS = new Set(["runtime-context", "time-context", "context", "skills-context", "memory-context"]);
/** Agent-to-agent sources rendered as message cards. */
export const MESSAGE_KINDS = new Set(["agent-message", "team-message", "dsh-agent-message", "subagent-settled"]);

/**
 * The kind of a user-role message: "user", "context", "message", "reference" (a referenced session's
 * snapshot) or "notice".
 * @param {any} message
 * @returns {"user" | "context" | "message" | "reference" | "notice"}
 */
export function userKind(message) {
  const kind = message?.source?.kind;
  if (kind === "user") return "user";
  if (kind === "session-reference") return "reference";
  if (CONTEXT_KINDS.has(kind) || (typeof kind === "string" && kind.endsWith("-context"))) return "context";
  if (MESSAGE_KINDS.has(kind)) return "message";
  return "notice";
}

/** The application-wide store: info, settings, index of sessions and workspaces, open session. */
export class AppStore extends Emitter {
  constructor() {
    super();
    this.info = null;
    this.settings = { revision: 0, values: {} };
    this.models = { providers: [], defaults: {} };
    /** @type {Map<string, any>} */
    this.sessions = new Map();
    /** @type {Map<string, any>} */
    this.workspaces = new Map();
    this.panels = [];
    /** @type {SessionStore | null} */
    this.current = null;
    this.draftWorkspace = null;
  }

  /** Upsert a SessionSummary. */
  upsertSession(summary) {
    this.upsertSessions([summary]);
  }

  /** Upsert a page of SessionSummary values (one "sessions" event). */
  upsertSessions(summaries) {
    for (const s of summaries) this.sessions.set(s.sessionId, { ...this.sessions.get(s.sessionId), ...s });
    this.emit("sessions");
  }

  /** Start over from the index stream's hello: its first page of sessions and every workspace. */
  resetIndex(hello) {
    this.sessions.clear();
    this.workspaces.clear();
    for (const w of hello.workspaces || []) this.workspaces.set(w.workspaceId, w);
    for (const s of hello.sessions || []) this.sessions.set(s.sessionId, s);
    this.emit("index");
    this.emit("sessions");
  }

  removeSession(id) {
    this.sessions.delete(id);
    this.emit("sessions");
  }

  upsertWorkspace(workspace) {
    this.workspaces.set(workspace.workspaceId, workspace);
    this.emit("sessions");
  }

  removeWorkspace(id) {
    this.workspaces.delete(id);
    this.emit("sessions");
  }

  /** A setting value by dotted key, else `fallback`. */
  setting(key, fallback) {
    const value = this.settings.values?.[key];
    return value === undefined ? fallback : value;
  }
}

/** One open session: events by seq, call/result pairing, pending requests, projections and live stream state. */
export class SessionStore extends Emitter {
  /** @param {string} id */
  constructor(id) {
    super();
    this.id = id;
    this.summary = null;
    this.header = null;
    /** @type {any[]} events in seq order */
    this.events = [];
    this.firstSeq = 0;
    this.lastSeq = -1;
    this.hasMore = false;
    /** @type {Map<string, {call: any, result: any}>} */
    this.calls = new Map();
    this.pending = { approvals: [], questions: [], queued: [] };
    this.projections = {};
    this.status = "idle";
    this.agents = null;
    this.team = null;
  }

  /** Take the server's `GET /api/sessions/{id}` answer. */
  load(detail) {
    this.summary = detail.session;
    this.header = detail.header;
    this.projections = { ...detail.projections };
    this.pending = normalisePending(detail.pending);
    this.status = detail.session?.status || "idle";
  }

  /** Insert a page of events (older or the tail); returns true when something was new. */
  addPage(events) {
    let changed = false;
    for (const ev of events) changed = this.insert(ev) || changed;
    return changed;
  }

  /** Insert one envelope keeping seq order and deduplicating; returns true when it was new. */
  insert(ev) {
    const last = this.events.length ? this.events[this.events.length - 1].seq : -1;
    if (ev.seq > last) {
      this.events.push(ev);
    } else {
      let lo = 0;
      let hi = this.events.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (this.events[mid].seq < ev.seq) lo = mid + 1;
        else hi = mid;
      }
      if (this.events[lo] && this.events[lo].seq === ev.seq) return false;
      this.events.splice(lo, 0, ev);
    }
    this.lastSeq = Math.max(this.lastSeq, ev.seq);
    this.firstSeq = this.events[0].seq;
    this.index(ev);
    return true;
  }

  /** Pair tool calls with results by callId. */
  index(ev) {
    if (ev.type === "tool/call") {
      const entry = this.calls.get(ev.data.callId) || { call: null, result: null };
      entry.call = ev;
      this.calls.set(ev.data.callId, entry);
    } else if (ev.type === "tool/result") {
      const id = ev.data.message?.toolCallId || ev.data.message?.source?.callId;
      const entry = this.calls.get(id) || { call: null, result: null };
      entry.result = ev;
      this.calls.set(id, entry);
    }
  }

  /** A live `session-event` frame; emits "event" when new. */
  live(ev) {
    if (this.insert(ev)) this.emit("event", ev);
  }

  setPending(pending) {
    this.pending = normalisePending(pending);
    this.emit("pending", this.pending);
  }

  setStatus(status) {
    this.status = status;
    this.emit("status", status);
  }

  setProjection(key, value) {
    this.projections[key] = value;
    this.emit("projection", key, value);
  }

  /** The request/header in force at `seq` (the latest one at or before it). */
  headerAt(seq) {
    for (let i = this.events.length - 1; i >= 0; i--) {
      const ev = this.events[i];
      if (ev.seq <= seq && ev.type === "request/header") return ev.data.header;
    }
    return null;
  }

  /** Whether this session is a member (a subagent or teammate) and so takes no composer input. */
  isMember() {
    return Boolean(this.summary?.parentSessionId) || this.header?.origin === "subagent";
  }
}

function normalisePending(pending) {
  return {
    approvals: pending?.approvals || [],
    questions: pending?.questions || [],
    queued: pending?.queued || [],
  };
}

export const app = new AppStore();
