// Entry module: wires the store, the streams and every panel of the page together.

import { ApiError, Stream, api, get } from "./api.js";
import { AgentsChip, agentTrail } from "./agents.js";
import { ApprovalCard } from "./approval.js";
import { ChatView } from "./chat.js";
import { Composer } from "./composer.js";
import { ChatFollower } from "./follow.js";
import { announce, copyText, h, icon, replace } from "./dom.js";
import { Drawer } from "./drawer.js";
import { Inspector } from "./inspector.js";
import { QuestionCard } from "./question.js";
import { SettingsDialog, applyFontSize, applyTheme } from "./settings.js";
import { Sidebar } from "./sidebar.js";
import { SessionStore, app } from "./store.js";
import { TodosBar } from "./todos.js";
import { SchedulesBar } from "./schedules.js";
import { GoalChip } from "./goal.js";
import { TrajectoryView } from "./trajectory.js";
import { UsageFooter } from "./usage.js";

const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const zone = () => Intl.DateTimeFormat().resolvedOptions().timeZone;
/** Live events are gathered for BATCH_MS, then applied SLICE_MS at a time, one slice per animation frame: the
 * cards a slice adds cost several times its length in style and layout in the same frame, so slices stay short. */
const BATCH_MS = 50;
const SLICE_MS = 6;
const uuid = () => (crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(16).slice(2)}`);

/** Show a one-line message in the toast and the polite live region. */
function notify(message) {
  const toast = $("toast");
  toast.textContent = message;
  toast.hidden = false;
  window.clearTimeout(notify.timer);
  notify.timer = window.setTimeout(() => {
    toast.hidden = true;
  }, 6000);
  announce(message);
}

/** A modal yes/no question; resolves true on confirm. */
function confirmDialog(message) {
  return new Promise((resolve) => {
    const opener = /** @type {HTMLElement} */ (document.activeElement);
    const yes = h("button", { type: "button", class: "btn danger", text: "Allow" });
    const no = h("button", { type: "button", class: "btn", text: "Cancel" });
    const dialog = h("dialog", { class: "dialog small", "aria-labelledby": "confirm-text" }, h("p", { id: "confirm-text", text: message }), h("div", { class: "card-actions" }, no, yes));
    let answer = false;
    yes.addEventListener("click", () => {
      answer = true;
      dialog.close();
    });
    no.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      opener?.focus();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal();
    no.focus();
  });
}

/** A modal text prompt; resolves the text or null. */
function promptDialog(label, value) {
  return new Promise((resolve) => {
    const opener = /** @type {HTMLElement} */ (document.activeElement);
    const input = h("input", { type: "text", class: "input", id: "prompt-input", value });
    const form = h("form", { method: "dialog" }, h("label", { for: "prompt-input", text: label }), input, h("div", { class: "card-actions" }, h("button", { type: "button", class: "btn", value: "cancel", text: "Cancel" }), h("button", { type: "submit", class: "btn primary", text: "Save" })));
    const dialog = h("dialog", { class: "dialog small", "aria-label": label }, form);
    let result = null;
    form.querySelector("button[value=cancel]").addEventListener("click", () => dialog.close());
    form.addEventListener("submit", () => {
      result = input.value;
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      opener?.focus();
      resolve(result);
    });
    document.body.append(dialog);
    dialog.showModal();
    input.select();
  });
}

class Page {
  constructor() {
    this.store = null;
    this.stream = null;
    /** Live events not yet applied, of the open session's store. */
    this.queued = { store: null, events: [], next: 0 };
    this.panelHooks = [];
    this.path = null;
    /** Reads of the agents tree begun, and frames of it received: the count a read's answer must still match. */
    this.agentsRead = 0;
    /** The same count for the delivery states of the session's sent messages. */
    this.deliveriesRead = 0;
    this.conn = { index: "open", session: "open" };
    this.target = null;
    this.settings = new SettingsDialog({ notify });
    this.sidebar = new Sidebar($("sidebar"), {
      openSession: (id) => this.openSession(id),
      newSession: (ws) => this.newSession(ws),
      openSettings: () => this.settings.open(),
      openShortcuts: () => this.shortcuts(),
    });
    this.drawer = new Drawer($("sidebar"), /** @type {HTMLElement} */ (document.querySelector(".title-row")), {
      beforeOpen: () => document.body.classList.contains("sidebar-collapsed") && this.sidebar.toggle(),
    });
    this.chat = new ChatView($("conversation"), {
      onInspect: (callId) => this.inspect(callId),
      onStop: () => this.stop(),
      openSession: (id) => this.openSession(id),
      openSettings: (tab) => this.settings.open(tab),
      collapse: () => app.setting("general.collapseWorkDetails", true) !== false,
      loadEarlier: () => this.loadEarlier(),
    });
    this.follow = new ChatFollower($("panel-chat"), $("conversation"));
    this.inspector = new Inspector($("inspector"), { store: () => this.store, onClose: () => this.closeInspector() });
    this.trajectory = new TrajectoryView($("trajectory"), {
      onSelect: (row) => this.inspector.follow(row),
      onOpen: (row) => this.inspector.show(row),
      onClose: () => this.closeInspector(),
    });
    this.composer = new Composer($("composer"), {
      send: (text, mode, references, images) => this.send(text, mode, references, images),
      exportLog: () => this.exportLog(),
      stop: () => this.stop(),
      interrupt: () => this.interrupt(),
      confirm: confirmDialog,
      notify,
    });
    const sessionId = () => this.store?.id || null;
    this.approval = new ApprovalCard($("approval-slot"), { sessionId, notify });
    this.question = new QuestionCard($("question-slot"), { sessionId, notify });
    this.todos = new TodosBar($("todos-slot"));
    this.schedules = new SchedulesBar($("schedules-slot"), { cancel: (id) => this.send(`/schedule delete ${id}`, "queue").catch((err) => notify(err.message)) });
    this.goal = new GoalChip($("goal-slot"));
    this.usage = new UsageFooter($("usage"));
    this.agents = new AgentsChip($("agents-slot"), { openSession: (id, path) => this.openSession(id, path) });
    this.menu();
    this.copyId();
    this.tabs();
    this.keys();
    app.on("sessions", () => {
      this.headerFromSummary();
      if (!this.store) this.fillDraftWorkspaces();
    });
    app.on("models", () => this.composer.bind(this.store));
    app.on("settings", () => {
      applyTheme(app.setting("appearance.theme", "system"));
      applyFontSize(app.setting("appearance.fontSize", 15));
      this.chat.deliveries();
    });
  }

  async boot() {
    const addressed = addressedSession();
    const opening = addressed ? this.fetchSession(addressed) : null;
    const [info, settings, models, panels] = await Promise.all([api.info(), api.settings(), api.models().catch(() => ({ providers: [], defaults: {} })), api.panels().catch(() => ({ panels: [] }))]);
    app.info = info;
    app.settings = settings;
    app.models = models;
    app.panels = panels.panels || [];
    app.emit("settings");
    this.index = new Stream(() => "/api/events", {
      hello: (d) => app.resetIndex(d),
      session: (s) => app.upsertSession(s),
      "session-removed": (d) => app.removeSession(d.sessionId),
      workspace: (w) => app.upsertWorkspace(w),
      "workspace-removed": (d) => app.removeWorkspace(d.workspaceId),
    }, (state) => this.setConn("index", state));
    await this.loadPanels();
    if (opening) await this.openSession(addressed, null, opening);
    else this.newSession(undefined, false);
    window.addEventListener("popstate", () => this.route());
    window.addEventListener("hashchange", () => this.route());
  }

  /** Follow the address after back/forward or an edit: `#/session/<id>` opens it, anything else the new-session draft. */
  route() {
    const id = addressedSession();
    if (id && id !== this.target) this.openSession(id);
    else if (!id && this.target) this.newSession(undefined, false);
  }

  /** Show `url` in the address bar: a new history entry when it changes (so Back returns), else the same one. */
  address(url) {
    if (`${location.pathname}${location.search}${location.hash}` === url) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
  }

  /** "Reconnecting…" while either stream (the index or the open session's) is down, on every page. */
  setConn(stream, state) {
    this.conn[stream] = state;
    const down = Object.values(this.conn).includes("reconnecting");
    $("conn").hidden = !down;
    $("conn").textContent = down ? "Reconnecting…" : "";
  }

  /** Load every ready panel with import() inside its own error boundary (D3). */
  async loadPanels() {
    const slots = $("panels");
    const known = new Set(app.panels.map((p) => p.id));
    const panels = [...app.panels];
    if (app.info?.features?.teams && !known.has("team")) panels.push({ id: "team", url: new URL("team.js", import.meta.url).pathname, status: "ready" });
    for (const panel of panels) {
      const slot = h("section", { class: "panel-slot", dataset: { panel: panel.id }, "aria-label": panel.id });
      slots.append(slot);
      const name = panel.id[0].toUpperCase() + panel.id.slice(1);
      if (panel.status !== "ready") {
        replace(slot, h("p", { class: "panel-unavailable", text: `${name} unavailable — ${oneSentence(panel.reason)}` }));
        continue;
      }
      try {
        const module = await import(panel.url);
        if (typeof module.mount !== "function") throw new Error("the panel module has no mount function");
        const hooks = module.mount(slot, { app, api: { ...api, get }, h, notify, openSession: (id) => this.openSession(id) }) || {};
        this.panelHooks.push({ panel, slot, hooks, name });
      } catch (err) {
        replace(slot, h("p", { class: "panel-unavailable", text: `${name} unavailable — ${oneSentence(err && err.message)}` }));
        api.clientError(`panel ${panel.id} failed to load: ${err && err.message}`, err && err.stack).catch(() => {});
      }
    }
    this.refreshPanels();
  }

  refreshPanels() {
    const slots = $("panels");
    slots.hidden = ![...slots.children].some((s) => !(/** @type {HTMLElement} */ (s).hidden) && s.childNodes.length);
  }

  panelCall(name, ...args) {
    for (const p of this.panelHooks) {
      if (typeof p.hooks[name] !== "function") continue;
      Promise.resolve()
        .then(() => p.hooks[name](...args))
        .catch((err) => replace(p.slot, h("p", { class: "panel-unavailable", text: `${p.name} unavailable — ${oneSentence(err && err.message)}` })))
        .finally(() => this.refreshPanels());
    }
  }

  tabs() {
    for (const id of ["chat", "trajectory"]) {
      const tab = $(`tab-${id}`);
      tab.addEventListener("click", () => this.showTab(id));
      tab.addEventListener("keydown", (e) => {
        if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
          e.preventDefault();
          const other = id === "chat" ? "trajectory" : "chat";
          this.showTab(other);
          $(`tab-${other}`).focus();
        }
      });
    }
  }

  showTab(id) {
    for (const name of ["chat", "trajectory"]) {
      const selected = name === id;
      $(`tab-${name}`).setAttribute("aria-selected", String(selected));
      $(`tab-${name}`).tabIndex = selected ? 0 : -1;
      $(`panel-${name}`).hidden = !selected;
    }
    if (id === "trajectory") this.trajectory.refresh();
  }

  inspect(callId) {
    this.showTab("trajectory");
    this.trajectory.selectCall(callId);
    this.trajectory.list.focus({ preventScroll: true });
  }

  closeInspector() {
    this.inspector.hide();
    this.trajectory.list.focus({ preventScroll: true });
  }

  menu() {
    const button = h("button", { type: "button", class: "icon-btn", id: "session-menu-button", "aria-label": "Session menu", "aria-haspopup": "menu", "aria-expanded": "false", "aria-controls": "session-menu" }, icon("more"));
    const list = h("div", { id: "session-menu", class: "popover menu", role: "menu", "aria-label": "Session", hidden: true });
    const item = (label, action) => {
      const el = h("button", { type: "button", role: "menuitem", class: "menu-item", tabindex: "-1", text: label });
      el.addEventListener("click", () => {
        close(true);
        action();
      });
      return el;
    };
    const link = (label, tree) => {
      const el = h("a", { role: "menuitem", class: "menu-item", tabindex: "-1", text: label, download: "" });
      el.addEventListener("click", () => close(true));
      el.dataset.tree = tree ? "1" : "";
      return el;
    };
    const items = [
      item("Rename", () => this.rename()),
      item("Copy session id", () => copyText(this.store?.id || "")),
      link("Download session log", false),
      link("Download with subagents (ZIP)", true),
    ];
    list.append(...items);
    const close = (refocus) => {
      list.hidden = true;
      button.setAttribute("aria-expanded", "false");
      if (refocus) button.focus();
    };
    const open = () => {
      for (const a of list.querySelectorAll("a")) {
        const tree = /** @type {HTMLElement} */ (a).dataset.tree === "1";
        a.setAttribute("href", this.store ? api.logUrl(this.store.id, tree) : "#");
        a.setAttribute("download", this.store ? `${this.store.id}.session.v4${tree ? ".zip" : ".jsonl"}` : "");
      }
      list.hidden = false;
      button.setAttribute("aria-expanded", "true");
      /** @type {HTMLElement} */ (items[0]).focus();
    };
    button.addEventListener("click", () => (list.hidden ? open() : close(true)));
    button.addEventListener("keydown", (e) => {
      if (e.key === "ArrowDown") {
        e.preventDefault();
        open();
      }
    });
    list.addEventListener("keydown", (e) => {
      const i = items.indexOf(/** @type {HTMLElement} */ (document.activeElement));
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        /** @type {HTMLElement} */ (items[(i + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length]).focus();
      } else if (e.key === "Escape") {
        e.preventDefault();
        close(true);
      } else if (e.key === " ") {
        e.preventDefault();
        /** @type {HTMLElement} */ (document.activeElement).click();
      }
    });
    document.addEventListener("click", (e) => {
      if (!list.hidden && !$("session-menu-wrap").contains(/** @type {Node} */ (e.target))) close(false);
    });
    replace($("session-menu-wrap"), button, list);
  }

  keys() {
    document.addEventListener("keydown", (e) => {
      const typing = /** @type {HTMLElement} */ (e.target).matches?.("input, textarea, select");
      if (e.altKey && (e.key === "n" || e.key === "N" || e.code === "KeyN")) {
        e.preventDefault();
        this.newSession();
      } else if ((e.ctrlKey || e.metaKey) && e.key.toLowerCase() === "k") {
        e.preventDefault();
        if (this.drawer.narrow()) this.drawer.open();
        else if (document.body.classList.contains("sidebar-collapsed")) this.sidebar.toggle();
        $("session-filter").focus();
      } else if ((e.ctrlKey || e.metaKey) && e.key === ",") {
        e.preventDefault();
        this.settings.open();
      } else if (e.altKey && (e.key === "1" || e.code === "Digit1")) {
        e.preventDefault();
        this.showTab("chat");
        $("tab-chat").focus();
      } else if (e.altKey && (e.key === "2" || e.code === "Digit2")) {
        e.preventDefault();
        this.showTab("trajectory");
        $("tab-trajectory").focus();
      } else if (e.key === "?" && !typing) {
        e.preventDefault();
        this.shortcuts();
      } else if (e.key === "Escape" && !$("inspector").hidden && !document.querySelector("dialog[open]")) {
        this.closeInspector();
      }
    });
  }

  shortcuts() {
    const opener = /** @type {HTMLElement} */ (document.activeElement);
    const rows = [["Alt+N", "New session"], ["Ctrl+K", "Filter sessions"], ["Ctrl+,", "Settings"], ["Alt+1 / Alt+2", "Chat / Trajectory"], ["Esc", "Close"], ["1–9", "Pick a question option"], ["Enter / Shift+Enter", "Send / new line"], ["Ctrl+Enter", "Steer into the running turn"]];
    const close = h("button", { type: "button", class: "btn", text: "Close" });
    const dialog = h("dialog", { class: "dialog small", "aria-labelledby": "shortcuts-title" }, h("h2", { id: "shortcuts-title", text: "Keyboard shortcuts" }), h("dl", { class: "shortcuts" }, rows.flatMap(([k, v]) => [h("dt", null, h("kbd", { text: k })), h("dd", { text: v })])), h("div", { class: "card-actions" }, close));
    close.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      opener?.focus();
    });
    document.body.append(dialog);
    dialog.showModal();
    close.focus();
  }

  /** The empty state of a new session: workspace and agent-preset chips and the composer. */
  newSession(workspaceId, focus = true) {
    this.closeStream();
    // Replace an address no session was shown for (one that failed to open) rather than stack it.
    if (this.store) this.address("/");
    else history.replaceState(null, "", "/");
    this.store = null;
    this.target = null;
    app.current = null;
    this.path = null;
    if (workspaceId) app.draftWorkspace = workspaceId;
    const ws = h("select", { class: "chip-select", id: "draft-workspace", "aria-label": "Workspace" });
    this.draftWorkspace = ws;
    this.fillDraftWorkspaces();
    ws.addEventListener("change", () => {
      app.draftWorkspace = ws.value;
    });
    const preset = h("select", { class: "chip-select", id: "draft-agent-preset", "aria-label": "Agent preset" }, ["standard", "minimal"].map((p) => h("option", { value: p, text: p })));
    this.draftPreset = preset;
    replace(
      $("conversation"),
      h("div", { class: "empty-state" }, h("h2", { text: "What should we work on?" }), h("p", { class: "muted", text: "The session starts when you send the first message." }), h("div", { class: "chip-row" }, h("span", { class: "chip-wrap" }, icon("folder"), ws), h("span", { class: "chip-wrap" }, icon("agents"), preset))),
    );
    this.composer.draft = { permissionPreset: null, model: null };
    this.composer.bind(null);
    this.setHeader("New session", null);
    this.approval.render([]);
    this.question.render([]);
    this.todos.render(null);
    this.schedules.render(null);
    this.goal.render(null);
    this.usage.render(null);
    this.agents.update(null);
    this.inspector.hide();
    this.showTab("chat");
    this.panelCall("session", null);
    this.sidebar.render();
    if (focus) this.composer.focus();
  }

  /** The workspace chip of the new-session draft (the index stream may arrive after it is drawn). */
  fillDraftWorkspaces() {
    const ws = this.draftWorkspace;
    if (!ws) return;
    const workspaces = [...app.workspaces.values()];
    if (!app.workspaces.has(app.draftWorkspace)) app.draftWorkspace = workspaces[0]?.workspaceId;
    replace(ws, workspaces.map((w) => h("option", { value: w.workspaceId, text: w.name, title: w.path, selected: w.workspaceId === app.draftWorkspace })));
  }

  setHeader(title, store) {
    $("session-title").textContent = title;
    $("preset-chip").textContent = store?.header?.agentPreset || store?.summary?.agentPreset || (store ? "standard" : "");
    $("preset-chip").hidden = !$("preset-chip").textContent;
    $("session-menu-wrap").hidden = !store;
    $("copy-id").hidden = !store;
    $("tab-trajectory").disabled = !store;
    const crumb = $("breadcrumb");
    const name = store?.summary?.name;
    const parts = this.path || (store?.isMember() && name ? ["lead", ...name.split("/")].map((n) => ({ name: n })) : null);
    crumb.hidden = !parts;
    replace(crumb, parts ? h("ol", null, parts.map((p, i) => h("li", null, crumbItem(p, i === parts.length - 1)))) : null);
    document.title = `${title} · pydsh`;
  }

  headerFromSummary() {
    if (!this.store) return;
    const summary = app.sessions.get(this.store.id);
    if (!summary) return;
    this.store.summary = { ...this.store.summary, ...summary };
    this.setHeader(summary.title || "New session", this.store);
  }

  /** A session's detail and last turns, read side by side (a session in the address is read while the page boots). */
  fetchSession(id) {
    const both = Promise.all([api.session(id), api.tail(id)]);
    both.catch(() => {});
    return both;
  }

  /** Open a session: its detail, its last turns (`fetched` when already asked for), then its stream after the
   * last seq read. */
  async openSession(id, path = null, fetched = null) {
    this.closeStream();
    this.target = id;
    this.draftWorkspace = null;
    this.path = path && path.length > 1 ? path : null;
    const store = new SessionStore(id);
    let detail;
    let page;
    try {
      [detail, page] = await (fetched || this.fetchSession(id));
    } catch (err) {
      notify(err instanceof ApiError && err.status === 404 ? "That session no longer exists." : err.message);
      this.target = this.store?.id || null;
      if (!this.store) this.newSession(undefined, false);
      return;
    }
    store.load(detail);
    store.addPage(page.events || []);
    store.hasMore = Boolean(page.hasMore);
    this.store = store;
    app.current = store;
    this.address(`/#/session/${encodeURIComponent(id)}`);
    this.chat.open(store);
    this.trajectory.open(store);
    this.inspector.hide();
    this.composer.bind(store);
    this.setHeader(store.summary?.title || detail.projections?.title?.title || detail.projections?.title || "New session", store);
    this.renderSideState();
    this.showTab("chat");
    this.sidebar.render();
    this.follow.jump();
    this.queued = { store, events: [], next: 0 };
    store.on("event", (ev) => this.queueEvent(store, ev));
    this.openStream(store, page.lastSeq ?? store.lastSeq);
    if (store.isMember() && !this.path) {
      this.memberPath(store).then((parts) => {
        if (parts && this.store === store) {
          this.path = parts;
          this.setHeader($("session-title").textContent, store);
        }
      });
    }
    this.panelCall("session", store);
  }

  /** The breadcrumb of a member opened without one: lead and each ancestor down to it in its root session's tree. */
  async memberPath(store) {
    try {
      let root = store.summary?.parentSessionId || store.header?.parentSession;
      for (let hops = 0; root && hops < 16; hops++) {
        const parent = (await api.session(root)).session;
        if (!parent.parentSessionId) break;
        root = parent.parentSessionId;
      }
      return root ? agentTrail((await api.agents(root)).root, store.id) : null;
    } catch {
      return null;
    }
  }

  renderSideState() {
    const store = this.store;
    this.approval.render(store.pending.approvals);
    this.question.render(store.pending.questions);
    this.composer.setQueued(store.pending.queued);
    this.composer.setRunning(store.status === "running");
    this.todos.render(store.projections.todos);
    this.schedules.render(store.projections.schedules);
    this.goal.render(store.projections.goal);
    this.usage.render(store);
  }

  openStream(store, after) {
    this.stream = new Stream(
      (seq) => `/api/sessions/${encodeURIComponent(store.id)}/stream?after=${seq ?? after}`,
      {
        hello: (d) => {
          store.setStatus(d.status);
          if (d.pending) store.setPending(d.pending);
          this.renderSideState();
          if (d.status !== "running") this.chat.settle();
          this.refreshProjections(store);
          this.refreshAgents(store);
          this.refreshDeliveries(store);
        },
        "session-event": (ev) => store.live(ev),
        "assistant-stream": (frame) => {
          this.chat.stream(frame);
        },
        status: (d) => {
          store.setStatus(d.status);
          this.composer.setRunning(d.status === "running");
          if (d.status !== "running") this.chat.settle();
        },
        pending: (d) => {
          store.setPending(d);
          this.renderSideState();
        },
        projection: (d) => {
          store.setProjection(d.key, d.value);
          if (d.key === "todos") this.todos.render(d.value);
          else if (d.key === "schedules") this.schedules.render(d.value);
          else if (d.key === "goal") this.goal.render(d.value);
          else if (d.key === "title") this.headerFromSummary();
          else if (d.key === "permissionPreset" || d.key === "modelSelection") this.composer.bind(store);
          this.usageSoon(store);
        },
        agents: (d) => {
          this.agentsRead++;
          this.agents.update(d);
        },
        team: (d) => this.panelCall("team", d),
        messages: (d) => {
          this.deliveriesRead++;
          this.deliveries(store, d);
        },
      },
      (state) => this.setConn("session", state),
    );
  }

  /** Read the agents tree once the stream is subscribed; every later change sends a frame, so a frame that
   * arrives while the read is in flight makes its answer unneeded (and possibly older): it is dropped. */
  refreshAgents(store) {
    const read = ++this.agentsRead;
    api
      .agents(store.id)
      .then((tree) => {
        if (this.store === store && read === this.agentsRead) this.agents.update(tree);
      })
      .catch(() => {
        if (this.store === store && read === this.agentsRead) this.agents.update(null);
      });
  }

  /** The delivery states of the messages this session sent, read once the stream is subscribed (a state that
   * changed before would have no frame) and dropped when a frame overtook the read, as for the agents tree. */
  refreshDeliveries(store) {
    if (!app.info?.features?.agentMessage || store.isMember()) return;
    const read = ++this.deliveriesRead;
    api
      .messages(store.id)
      .then((view) => {
        if (this.store === store && read === this.deliveriesRead) this.deliveries(store, view);
      })
      .catch(() => {});
  }

  /** Re-read the projections: changes between the first read and the stream's subscription have no frame. */
  refreshProjections(store) {
    api
      .session(store.id)
      .then((detail) => {
        if (this.store !== store) return;
        store.summary = { ...store.summary, ...detail.session };
        store.projections = { ...store.projections, ...detail.projections };
        this.usage.render(store);
        this.todos.render(store.projections.todos);
        this.schedules.render(store.projections.schedules);
        this.goal.render(store.projections.goal);
      })
      .catch(() => {});
  }

  closeStream() {
    this.stream?.close();
    this.stream = null;
    this.setConn("session", "open");
  }

  /** A live event: applied soon with the others of its burst (the stream can deliver hundreds in one task). */
  queueEvent(store, ev) {
    const queue = this.queued;
    if (queue.store !== store) return;
    queue.events.push(ev);
    if (queue.events.length - queue.next === 1) window.setTimeout(() => window.requestAnimationFrame(() => this.drain(queue)), BATCH_MS);
  }

  /** Apply queued live events for up to SLICE_MS, then go on in the next frame until none is left. */
  drain(queue) {
    if (this.queued !== queue) return;
    const until = performance.now() + SLICE_MS;
    while (queue.next < queue.events.length && performance.now() < until) this.applyLive(queue.store, queue.events[queue.next++]);
    if (queue.next < queue.events.length) window.requestAnimationFrame(() => this.drain(queue));
    else {
      queue.events = [];
      queue.next = 0;
    }
  }

  /** Fold one live event into every view. */
  applyLive(store, ev) {
    this.chat.apply(ev);
    this.trajectory.changed();
    if (ev.type === "turn/start" || ev.type === "step/start" || ev.type === "assistant/message") this.usageSoon(store);
    if (ev.type === "todo/write") this.todos.render(ev.data.todos);
    if (ev.type === "turn/end") this.refreshProjections(store);
    this.panelCall("event", ev);
  }

  /** Redraw the usage footer once per frame at most (it folds every loaded event). */
  usageSoon(store) {
    if (this.usageQueued) return;
    this.usageQueued = true;
    window.requestAnimationFrame(() => {
      this.usageQueued = false;
      if (this.store === store) this.usage.render(store);
    });
  }

  async loadEarlier() {
    const store = this.store;
    if (!store) return;
    const page = await api.before(store.id, store.firstSeq);
    store.addPage(page.events || []);
    store.hasMore = Boolean(page.hasMore);
    this.queued = { store, events: [], next: 0 };
    this.chat.open(store);
    this.trajectory.refresh();
  }

  /** The delivery states of the open session's cross-session messages: its tool cards and the Messages panel. */
  deliveries(store, view) {
    if (this.store !== store) return;
    this.chat.deliveries(view.messages || []);
    this.panelCall("messages", view);
  }

  /** The header's "Copy ID" button: copies the open session's id and says so for a moment. */
  copyId() {
    const button = $("copy-id");
    button.addEventListener("click", async () => {
      if (!this.store) return;
      await copyText(this.store.id);
      button.textContent = "Copied";
      announce("Session ID copied");
      window.clearTimeout(button.timer);
      button.timer = window.setTimeout(() => {
        button.textContent = "Copy ID";
      }, 1500);
    });
  }

  /** "/export": download the open session's log. */
  exportLog() {
    if (!this.store) {
      notify("There is no session to export yet.");
      return;
    }
    const link = h("a", { href: api.logUrl(this.store.id), download: `${this.store.id}.session.v4.jsonl`, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
  }

  async send(text, mode, references = [], images = []) {
    const refs = { ...(references.length ? { references } : {}), ...(images.length ? { images } : {}) };
    if (!this.store) {
      const ws = app.workspaces.get(app.draftWorkspace);
      const cwd = ws?.path || app.info?.cwd || [...app.workspaces.values()][0]?.path;
      const body = { cwd, agentPreset: this.draftPreset?.value || "standard", prompt: { text, clientMessageId: uuid(), clientTimeZone: zone(), ...refs } };
      const preset = this.composer.draft.permissionPreset || app.setting("general.defaultPermissionPreset", null);
      if (preset) body.permissionPreset = preset;
      if (this.composer.draft.model) body.model = this.composer.draft.model;
      const created = await api.createSession(body);
      app.upsertSession(created.session);
      await this.openSession(created.session.sessionId);
      return;
    }
    this.follow.jump();
    const result = await api.prompt(this.store.id, { text, mode: mode === "steer" && this.store.status === "running" ? "steer" : "queue", clientMessageId: uuid(), clientTimeZone: zone(), ...refs });
    if (result?.queued) announce("Queued as the next turn");
  }

  async stop() {
    if (this.store) await api.cancel(this.store.id).catch((err) => notify(err.message));
  }

  async interrupt() {
    if (this.store) await api.interrupt(this.store.id).catch((err) => notify(err.message));
  }

  async rename() {
    if (!this.store) return;
    const title = await promptDialog("Session title", $("session-title").textContent || "");
    if (title === null) return;
    try {
      await api.title(this.store.id, title);
      $("session-title").textContent = title;
    } catch (err) {
      notify(err.message);
    }
  }
}

/** The session id the address names (`#/session/<id>`), or null (also for a mistyped escape). */
function addressedSession() {
  const match = location.hash.match(/^#\/session\/(.+)$/);
  try {
    return match ? decodeURIComponent(match[1]) : null;
  } catch {
    return null;
  }
}

/** One breadcrumb entry: the open session as plain text, an ancestor as a link that opens it. */
function crumbItem(part, current) {
  if (current || !part.id) return h("span", { "aria-current": current ? "page" : null, text: part.name });
  return h("a", { href: `#/session/${encodeURIComponent(part.id)}`, text: part.name });
}

function oneSentence(text) {
  const first = String(text || "it failed to load").split("\n")[0].replace(/\s+at\s.*$/, "").replace(/(\/[\w.-]+)+/g, "").trim();
  return first.endsWith(".") ? first : `${first}.`;
}

const page = new Page();
page.boot().catch((err) => {
  notify(`The page could not load: ${err.message}`);
  throw err;
});
