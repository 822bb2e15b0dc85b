// The composer: auto-growing textarea (Enter sends, Shift+Enter newline, Ctrl/Cmd+Enter steers), permission,
// model and effort selectors, queued-prompt chips, Send / Stop, and Interrupt for member sessions.

import { ApiError, api } from "./api.js";
import { Completion } from "./completion.js";
import { h, icon, replace } from "./dom.js";
import { ImageTray } from "./images.js";
import { app } from "./store.js";
import { commandList, filesMatching, mergedSessions, pageCommand, sessionsFound, sessionsMatching } from "./suggestions.js";

export const PRESETS = ["read-only", "workspace-write", "danger-full-access"];

/** The composer at the bottom of the main pane. */
export class Composer {
  /**
   * @param {HTMLElement} root
   * @param {{send: (text: string, mode: "queue" | "steer", references: string[], images: object[]) => Promise<void>, stop: () => void,
   *   interrupt: () => void, confirm: (message: string) => Promise<boolean>, notify: (message: string) => void,
   *   exportLog: () => void}} ctx
   */
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx;
    this.draft = { permissionPreset: null, model: null };
    /** @type {Map<string, string>} referenced session id → title (the "@" session reference) */
    this.references = new Map();
    this.build();
  }

  build() {
    this.queue = h("div", { class: "queue-chips", "aria-label": "Queued prompts", role: "list" });
    this.text = h("textarea", { id: "composer-input", class: "composer-input", rows: "1", placeholder: "Ask anything — Enter sends, Shift+Enter adds a line", "aria-label": "Message" });
    this.text.addEventListener("input", () => this.grow());
    this.text.addEventListener("keydown", (e) => this.key(e));
    this.completion = this.buildCompletion();
    this.refs = h("div", { class: "reference-chips", role: "list", "aria-label": "Referenced sessions", hidden: true });
    this.permission = h("select", { class: "chip-select", id: "permission-select", "aria-label": "Permission preset" });
    this.permission.addEventListener("change", () => this.changePermission());
    this.model = h("select", { class: "chip-select", id: "model-select", "aria-label": "Model" });
    this.model.addEventListener("change", () => this.changeModel(true));
    this.effort = h("select", { class: "chip-select", id: "effort-select", "aria-label": "Effort" });
    this.effort.addEventListener("change", () => this.changeModel(false));
    this.sendButton = h("button", { type: "button", class: "btn primary send-btn", "aria-label": "Send" }, icon("send"));
    this.sendButton.addEventListener("click", () => this.submit("queue"));
    this.stopButton = h("button", { type: "button", class: "btn danger stop-main", hidden: true }, icon("stop"), "Stop");
    this.stopButton.addEventListener("click", () => this.ctx.stop());
    this.interrupt = h("button", { type: "button", class: "btn", hidden: true }, icon("stop"), "Interrupt");
    this.interrupt.addEventListener("click", () => this.ctx.interrupt());
    this.memberNote = h("p", { class: "muted member-note", hidden: true, text: "Agents give this session its input; you can interrupt it." });
    this.error = h("p", { class: "composer-error", role: "alert", hidden: true });
    this.text.addEventListener("input", () => this.showError(null));
    this.images = new ImageTray((message) => this.showError(message));
    this.text.addEventListener("paste", (e) => this.images.paste(e));
    this.box = h(
      "div",
      { class: "composer-box" },
      this.refs,
      this.images.el,
      this.completion.el,
      this.text,
      h("div", { class: "composer-row" }, this.images.controls, h("span", { class: "chip-wrap" }, icon("shield"), this.permission), h("span", { class: "grow" }), h("span", { class: "chip-wrap" }, icon("cpu"), this.model), this.effort, this.stopButton, this.sendButton),
    );
    replace(this.root, this.queue, this.error, this.box, h("div", { class: "member-bar" }, this.memberNote, this.interrupt));
  }

  grow() {
    this.text.style.height = "auto";
    this.text.style.height = `${Math.min(this.text.scrollHeight, 240)}px`;
  }

  key(e) {
    if (this.completion.key(e)) return;
    if (e.key !== "Enter" || e.isComposing) return;
    const swapped = app.setting("general.enterSends", true) === false;
    const mod = e.ctrlKey || e.metaKey;
    if (e.shiftKey) return;
    if (swapped && !mod) return;
    e.preventDefault();
    const busyMode = app.setting("general.sendWhileBusy", "queue");
    const mode = swapped ? busyMode : mod ? "steer" : busyMode;
    this.submit(mode);
  }

  async submit(mode) {
    const text = this.text.value;
    const images = this.images.blocks();
    if (!text.trim() && !images.length) return;
    if (!images.length && (await this.runCommand(text))) return;
    this.text.value = "";
    this.grow();
    this.showError(null);
    try {
      await this.ctx.send(text, mode, [...this.references.keys()], images);
      this.setReferences(new Map());
      this.images.clear();
    } catch (err) {
      this.text.value = text;
      this.grow();
      if (!(err instanceof ApiError)) throw err;
      this.showError(err.code === "unreachable" ? `${err.message} Your message is kept here; send it again once the server is back.` : err.message);
    }
  }

  /** Say above the composer why a send failed (null hides it); the draft stays in the box. */
  showError(message) {
    this.error.textContent = message || "";
    this.error.hidden = !message;
  }

  /** Show the controls for a session (or the new-session draft when `store` is null). */
  bind(store) {
    if (store !== this.store) {
      this.requested = null;
      this.setReferences(new Map());
    }
    this.store = store;
    const member = Boolean(store?.isMember());
    this.box.hidden = member;
    this.memberNote.hidden = !member;
    this.interrupt.hidden = !member;
    this.fillPermission();
    this.fillModels();
    this.setRunning(store?.status === "running");
    this.setQueued(store?.pending.queued || []);
  }

  currentPreset() {
    if (!this.store) return this.draft.permissionPreset || app.setting("general.defaultPermissionPreset", null) || app.info?.defaults?.permissionPreset || "workspace-write";
    const value = this.store.projections.permissionPreset;
    return (typeof value === "object" && value ? value.preset : value) || this.store.summary?.permissionPreset || "workspace-write";
  }

  fillPermission() {
    const preset = this.currentPreset();
    const options = PRESETS.map((p) => h("option", { value: p, text: p, selected: p === preset }));
    if (!PRESETS.includes(preset)) options.push(h("option", { value: "custom", text: "custom", disabled: true, selected: true }));
    replace(this.permission, options);
    this.permission.dataset.value = PRESETS.includes(preset) ? preset : "custom";
  }

  async changePermission() {
    const preset = this.permission.value;
    if (preset === "danger-full-access" && !(await this.ctx.confirm("Allow danger-full-access? Tools may then change anything on this machine without asking."))) {
      this.permission.value = this.permission.dataset.value;
      return;
    }
    this.permission.dataset.value = preset;
    if (!this.store) {
      this.draft.permissionPreset = preset;
      return;
    }
    try {
      await api.permission(this.store.id, preset);
    } catch (err) {
      this.ctx.notify(err.message);
      this.fillPermission();
    }
  }

  currentModel() {
    if (!this.store) return this.draft.model || app.models.defaults || app.info?.defaults || {};
    const selection = this.store.projections.modelSelection;
    const shown = (selection && selection.model ? selection : null) || this.store.summary?.model || app.models.defaults || {};
    // A choice still on its way to the server wins over an older projection that arrives meanwhile.
    if (this.requested && !sameRoute(shown, this.requested)) return this.requested;
    this.requested = null;
    return shown;
  }

  fillModels() {
    const current = this.currentModel();
    const options = [];
    let found = false;
    for (const provider of app.models.providers || []) {
      if (!provider.models?.length) continue;
      const group = h("optgroup", { label: provider.configured ? provider.label || provider.id : `${provider.label || provider.id} — add a key in Settings` });
      for (const model of provider.models || []) {
        const value = `${provider.id}\u0000${model.id}`;
        const selected = provider.id === current.provider && model.id === current.model;
        found = found || selected;
        group.append(h("option", { value, text: model.label || model.id, disabled: !provider.configured && !selected, selected }));
      }
      options.push(group);
    }
    if (!found && current.model) options.unshift(h("option", { value: `${current.provider}\u0000${current.model}`, text: current.model, selected: true }));
    replace(this.model, options);
    this.fillEfforts(current.effort);
  }

  selectedModel() {
    const [provider, model] = this.model.value.split("\u0000");
    const entry = (app.models.providers || []).find((p) => p.id === provider)?.models?.find((m) => m.id === model);
    return { provider, model, efforts: entry?.efforts || [], defaultEffort: entry?.defaultEffort };
  }

  /** The effort chip: `effort`, else the model's own default (the one its requests get), never just the first listed. */
  fillEfforts(effort) {
    const { efforts, defaultEffort } = this.selectedModel();
    effort = effort || defaultEffort;
    this.effort.hidden = !efforts.length;
    replace(
      this.effort,
      efforts.map((e) => {
        const id = typeof e === "string" ? e : e.id;
        return h("option", { value: id, text: typeof e === "string" ? e : e.name || e.id, selected: id === effort });
      }),
    );
  }

  async changeModel(modelChanged) {
    if (modelChanged) this.fillEfforts(this.currentModel().effort);
    const { provider, model } = this.selectedModel();
    const body = { provider, model };
    if (!this.effort.hidden && this.effort.value) body.effort = this.effort.value;
    if (!this.store) {
      this.draft.model = body;
      return;
    }
    this.requested = body;
    try {
      await api.model(this.store.id, body);
    } catch (err) {
      this.requested = null;
      this.ctx.notify(err.message);
      this.fillModels();
    }
  }

  setRunning(running) {
    this.stopButton.hidden = !running || Boolean(this.store?.isMember());
  }

  /** Queued prompts as chips with × until claimed. */
  setQueued(queued) {
    replace(
      this.queue,
      queued.map((q) => {
        const remove = h("button", { type: "button", class: "icon-btn", "aria-label": `Remove queued prompt: ${q.text.slice(0, 40)}` }, icon("close"));
        remove.addEventListener("click", async () => {
          try {
            await api.unqueue(this.store.id, q.messageId);
          } catch (err) {
            this.ctx.notify(err.message);
          }
        });
        return h("div", { class: "queue-chip", role: "listitem", dataset: { messageId: q.messageId } }, h("span", { class: "chip-tag", text: q.mode === "steer" ? "Steer" : "Queued" }), h("span", { class: "queue-text", text: q.text }), remove);
      }),
    );
    this.queue.hidden = !queued.length;
  }

  focus() {
    if (!this.box.hidden) this.text.focus();
  }

  // -- completion, session references and page commands (F29) ---------------------------------------

  buildCompletion() {
    return new Completion(/** @type {HTMLTextAreaElement} */ (this.text), {
      commands: () => commandList(Boolean(this.store), PRESETS),
      sessions: (query) => sessionsMatching(query, this.unreferenced()),
      findSessions: (query) => sessionsFound(query, this.unreferenced()),
      merge: mergedSessions,
      files: (query) => filesMatching(this.store ? this.store.summary?.workspaceId : app.draftWorkspace, query),
      attach: (session) => this.setReferences(new Map([...this.references, [session.sessionId, session.title || "New session"]])),
    });
  }

  /** Sessions the `@` popup leaves out: the open one and those already referenced. */
  unreferenced() {
    return new Set([this.store?.id, ...this.references.keys()]);
  }

  /** Show the referenced sessions as chips with × above the text. */
  setReferences(references) {
    this.references = references;
    replace(
      this.refs,
      [...references].map(([id, title]) => {
        const remove = h("button", { type: "button", class: "icon-btn", "aria-label": `Remove reference to ${title}` }, icon("close"));
        remove.addEventListener("click", () => {
          const next = new Map(this.references);
          next.delete(id);
          this.setReferences(next);
          this.text.focus();
        });
        return h("div", { class: "reference-chip", role: "listitem", dataset: { sessionId: id } }, icon("message"), h("span", { class: "chip-tag", text: "Session" }), h("span", { class: "reference-title", text: title }), remove);
      }),
    );
    this.refs.hidden = !references.size;
  }

  /** Run "/model <id>", "/permission <preset>" or "/export" typed as the whole prompt; true when it was one. */
  async runCommand(text) {
    const command = pageCommand(text);
    if (!command) return false;
    if (command.name === "export") this.ctx.exportLog();
    else if (command.name === "permission") {
      if (!PRESETS.includes(command.arg)) return this.commandError(`Use /permission with one of ${PRESETS.join(", ")}.`);
      this.permission.value = command.arg;
      await this.changePermission();
    } else {
      const option = [...this.model.options].find((o) => o.value.split("\u0000")[1] === command.arg && !o.disabled);
      if (!option) return this.commandError(`No configured model is called "${command.arg}".`);
      this.model.value = option.value;
      await this.changeModel(true);
    }
    this.text.value = "";
    this.grow();
    return true;
  }

  commandError(message) {
    this.ctx.notify(message);
    return true;
  }
}

/** Whether two routes name the same provider, model and effort (an absent effort is the model's default). */
function sameRoute(a, b) {
  return a.provider === b.provider && a.model === b.model && (a.effort || a.reasoningEffort || null) === (b.effort || null);
}
