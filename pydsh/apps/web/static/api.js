// The HTTP API of the server (spec §4): JSON endpoints and the two event streams.

/** An API error carrying the server's one-line message and code. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * Call a JSON endpoint; resolves to the parsed body (or null for 204).
 * @param {string} method
 * @param {string} path
 * @param {any} [body]
 * @returns {Promise<any>}
 */
export async function call(method, path, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (method !== "GET") init.headers["Content-Type"] = "application/json";
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "unreachable", "The pydsh server cannot be reached; is it still running?");
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || "http_error", error.message || `The server answered ${response.status}.`);
  }
  return data;
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}) => call("POST", path, body);
export const put = (path, body) => call("PUT", path, body);
export const patch = (path, body) => call("PATCH", path, body);
export const del = (path) => call("DELETE", path);

const enc = encodeURIComponent;

export const api = {
  info: () => get("/api/info"),
  panels: () => get("/api/ui/panels"),
  workspaces: () => get("/api/known-workspaces"),
  addWorkspace: (path) => post("/api/known-workspaces", { path }),
  removeWorkspace: (id) => del(`/api/known-workspaces/${enc(id)}`),
  /** Workspace-relative paths of a workspace's files whose path contains `q` (`{files, truncated}`). */
  files: (workspaceId, q) => get(`/api/known-workspaces/${enc(workspaceId)}/files?q=${enc(q)}`),
  /** The folders of `path` (home by default) for the directory browser. */
  directories: (path) => get(`/api/directories${path ? `?path=${enc(path)}` : ""}`),
  /** A page of root sessions (`{sessions, nextCursor?}`), optionally of one workspace or matching a title. */
  sessions: ({ workspace, cursor, q, limit = 50 } = {}) => {
    const params = new URLSearchParams({ limit: String(limit) });
    for (const [key, value] of Object.entries({ workspace, cursor, q })) if (value) params.set(key, value);
    return get(`/api/sessions?${params}`);
  },
  createSession: (body) => post("/api/sessions", body),
  session: (id) => get(`/api/sessions/${enc(id)}`),
  tail: (id) => get(`/api/sessions/${enc(id)}/events?tail=turns:2`),
  before: (id, seq) => get(`/api/sessions/${enc(id)}/events?before=${seq}&limit=500`),
  prompt: (id, body) => post(`/api/sessions/${enc(id)}/prompt`, body),
  unqueue: (id, messageId) => del(`/api/sessions/${enc(id)}/queue/${enc(messageId)}`),
  cancel: (id) => post(`/api/sessions/${enc(id)}/cancel`, {}),
  interrupt: (id) => post(`/api/sessions/${enc(id)}/interrupt`, {}),
  permission: (id, preset) => put(`/api/sessions/${enc(id)}/permission`, { preset }),
  model: (id, model) => put(`/api/sessions/${enc(id)}/model`, model),
  title: (id, title) => put(`/api/sessions/${enc(id)}/title`, { title }),
  approve: (id, approvalId, outcome) => post(`/api/sessions/${enc(id)}/approvals/${enc(approvalId)}`, { outcome }),
  answer: (id, requestId, body) => post(`/api/sessions/${enc(id)}/questions/${enc(requestId)}`, body),
  agents: (id) => get(`/api/sessions/${enc(id)}/agents`),
  team: (id) => get(`/api/sessions/${enc(id)}/team`),
  messages: (id) => get(`/api/sessions/${enc(id)}/messages`),
  logUrl: (id, tree = false) => `/api/sessions/${enc(id)}/log${tree ? "?tree=1" : ""}`,
  models: () => get("/api/models"),
  addProvider: (body) => post("/api/providers", body),
  editProvider: (id, body) => put(`/api/providers/${enc(id)}`, body),
  removeProvider: (id) => del(`/api/providers/${enc(id)}`),
  settings: () => get("/api/settings"),
  patchSettings: (expectedRevision, set) => patch("/api/settings", { expectedRevision, set }),
  clientError: (message, stack) => post("/api/client-errors", { message, stack }),
};

/**
 * An EventSource that reconnects with backoff (0.5 → 8 s), resumes after the last seen seq and reports
 * its connection state; named events go to `handlers[name](data)`.
 */
export class Stream {
  /**
   * @param {(after: number | null) => string} url
   * @param {Record<string, (data: any, id: string) => void>} handlers
   * @param {(state: "open" | "reconnecting") => void} onState
   */
  constructor(url, handlers, onState) {
    this.url = url;
    this.handlers = handlers;
    this.onState = onState;
    this.after = null;
    this.delay = 500;
    this.closed = false;
    this.source = null;
    this.timer = 0;
    this.state = null;
    this.onOffline = () => this.retry();
    window.addEventListener("offline", this.onOffline);
    this.open();
  }

  open() {
    if (this.closed) return;
    const source = new EventSource(this.url(this.after));
    this.source = source;
    source.onopen = () => {
      this.delay = 500;
      this.setState("open");
    };
    source.onerror = () => this.retry();
    for (const name of Object.keys(this.handlers)) {
      source.addEventListener(name, (event) => {
        if (event.lastEventId) this.after = Number(event.lastEventId);
        this.setState("open");
        let data = null;
        try {
          data = JSON.parse(event.data);
        } catch {
          return;
        }
        this.handlers[name](data, event.lastEventId);
      });
    }
    source.addEventListener("overflow", (event) => {
      const data = JSON.parse(event.data || "{}");
      if (typeof data.lastSentSeq === "number") this.after = data.lastSentSeq;
      this.reopen(0);
    });
  }

  /** Report a connection state once per change (every frame of a burst says "open"). */
  setState(state) {
    if (state === this.state) return;
    this.state = state;
    this.onState(state);
  }

  retry() {
    if (this.closed) return;
    this.setState("reconnecting");
    this.reopen(this.delay);
    this.delay = Math.min(this.delay * 2, 8000);
  }

  reopen(delay) {
    if (this.source) this.source.close();
    this.source = null;
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.open(), delay);
  }

  close() {
    this.closed = true;
    window.removeEventListener("offline", this.onOffline);
    window.clearTimeout(this.timer);
    if (this.source) this.source.close();
  }
}
