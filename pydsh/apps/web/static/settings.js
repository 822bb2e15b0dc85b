// The Settings dialog (Ctrl+,): General, Appearance (Light / Dark / System, font size), Models (providers
// with write-only keys, defaults) and About (version, profile, DSH_HOME, panels and their status).

import { api } from "./api.js";
import { h, icon, replace } from "./dom.js";
import { PRESETS } from "./composer.js";
import { app } from "./store.js";

const TABS = [["general", "General"], ["appearance", "Appearance"], ["models", "Models"], ["about", "About"]];
const PLUGIN_TAB = ["plugins", "Plugin configuration"];

/** The tabs shown: "Plugin configuration" only when a composed plugin has settings (agent-message). */
function tabs() {
  return app.info?.features?.agentMessage ? [...TABS.slice(0, 3), PLUGIN_TAB, TABS[3]] : TABS;
}

/** Apply a theme preference ("light" | "dark" | "system") to <html> and remember it for boot.js. */
export function applyTheme(pref) {
  const dark = pref === "dark" || (pref === "system" && window.matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.dataset.theme = dark ? "dark" : "light";
  try {
    localStorage.setItem("pydsh-theme", pref);
  } catch {
    /* storage may be unavailable; the server copy still applies */
  }
}

/** Apply the conversation font size preference. */
export function applyFontSize(size) {
  const px = Number(size) || 15;
  document.documentElement.style.setProperty("--chat-font", `${Math.min(22, Math.max(12, px))}px`);
}

let saving = Promise.resolve();

/** Save one or more settings (revisioned) and keep the app's copy. Saves run one after another, so a
 * slower answer to an earlier save never overwrites the app's copy with what a later one changed. */
export function saveSettings(set) {
  const run = saving.then(() => patchSettings(set));
  saving = run.catch(() => {});
  return run;
}

async function patchSettings(set) {
  try {
    app.settings = await api.patchSettings(app.settings.revision, set);
  } catch (err) {
    if (err.status !== 409) throw err;
    app.settings = await api.settings();
    app.settings = await api.patchSettings(app.settings.revision, set);
  }
  app.emit("settings");
}

/** The settings dialog. */
export class SettingsDialog {
  /** @param {{notify: (message: string) => void}} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.tab = "general";
    this.dialog = h("dialog", { class: "dialog settings-dialog", "aria-labelledby": "settings-title" });
    this.dialog.addEventListener("close", () => this.opener?.focus());
    document.body.append(this.dialog);
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
      if (app.setting("appearance.theme", "system") === "system") applyTheme("system");
    });
  }

  /** Open on a tab; focus returns to the opener on close. */
  open(tab = this.tab) {
    this.opener = /** @type {HTMLElement} */ (document.activeElement);
    this.tab = tab;
    this.render();
    if (!this.dialog.open) this.dialog.showModal();
    this.dialog.querySelector(`[role=tab][aria-selected=true]`)?.focus();
  }

  render() {
    const close = h("button", { type: "button", class: "icon-btn", "aria-label": "Close settings" }, icon("close"));
    close.addEventListener("click", () => this.dialog.close());
    const tablist = h("div", { class: "tabs vertical", role: "tablist", "aria-label": "Settings sections", "aria-orientation": "vertical" });
    const shown = tabs();
    shown.forEach(([id, label], k) => {
      const selected = id === this.tab;
      const tab = h("button", { type: "button", role: "tab", id: `settings-tab-${id}`, class: "tab", "aria-selected": String(selected), "aria-controls": "settings-panel", tabindex: selected ? "0" : "-1", text: label });
      tab.addEventListener("click", () => {
        this.tab = id;
        this.render();
        this.dialog.querySelector(`#settings-tab-${id}`)?.focus();
      });
      tab.addEventListener("keydown", (e) => {
        if (!["ArrowDown", "ArrowUp"].includes(e.key)) return;
        e.preventDefault();
        const next = shown[(k + (e.key === "ArrowDown" ? 1 : shown.length - 1)) % shown.length][0];
        this.tab = next;
        this.render();
        this.dialog.querySelector(`#settings-tab-${next}`)?.focus();
      });
      tablist.append(tab);
    });
    const panel = h("div", { class: "settings-panel", id: "settings-panel", role: "tabpanel", "aria-labelledby": `settings-tab-${this.tab}` });
    this[this.tab](panel);
    replace(this.dialog, h("header", { class: "dialog-head" }, h("h2", { id: "settings-title", text: "Settings" }), close), h("div", { class: "settings-body" }, tablist, panel));
  }

  field(label, control, hint) {
    const id = `set-${Math.random().toString(36).slice(2, 9)}`;
    control.id = id;
    return h("div", { class: "field" }, h("label", { for: id, text: label }), control, hint ? h("p", { class: "hint", text: hint }) : null);
  }

  select(key, fallback, options, parse = (v) => v) {
    const current = app.setting(key, fallback);
    const select = h("select", { class: "input" }, options.map(([value, label]) => h("option", { value: String(value), text: label, selected: String(value) === String(current) })));
    select.addEventListener("change", () => this.save({ [key]: parse(select.value) }));
    return select;
  }

  async save(set) {
    try {
      await saveSettings(set);
    } catch (err) {
      this.ctx.notify(err.message);
    }
  }

  general(panel) {
    const collapse = h("input", { type: "checkbox", checked: app.setting("general.collapseWorkDetails", true) !== false });
    collapse.addEventListener("change", () => this.save({ "general.collapseWorkDetails": collapse.checked }));
    panel.append(
      h("h3", { text: "General" }),
      this.field("Default permission for new sessions", this.select("general.defaultPermissionPreset", app.info?.defaults?.permissionPreset || "workspace-write", PRESETS.map((p) => [p, p]))),
      this.field("Sending while the agent works", this.select("general.sendWhileBusy", "queue", [["queue", "Queue as the next turn"], ["steer", "Steer into the next step"]])),
      this.field("Enter key", this.select("general.enterSends", true, [[true, "Enter sends, Shift+Enter adds a line"], [false, "Enter adds a line, Ctrl+Enter sends"]], (v) => v === "true")),
      h("div", { class: "field check" }, h("label", null, collapse, " Collapse work details when a turn completes")),
      this.field("Detail level", this.select("general.detailLevel", "normal", [["compact", "Compact"], ["normal", "Normal"], ["verbose", "Show every notice"]])),
    );
  }

  appearance(panel) {
    const current = app.setting("appearance.theme", "system");
    const group = h("div", { class: "radio-row", role: "radiogroup", "aria-label": "Theme" });
    for (const [value, label] of [["light", "Light"], ["dark", "Dark"], ["system", "System"]]) {
      const input = h("input", { type: "radio", name: "theme", value, checked: value === current });
      input.addEventListener("change", () => {
        applyTheme(value);
        this.save({ "appearance.theme": value });
      });
      group.append(h("label", { class: "radio" }, input, ` ${label}`));
    }
    const font = this.select("appearance.fontSize", 15, [[13, "Small"], [15, "Medium"], [17, "Large"]], Number);
    font.addEventListener("change", () => applyFontSize(font.value));
    panel.append(h("h3", { text: "Appearance" }), h("fieldset", { class: "field" }, h("legend", { text: "Theme" }), group), this.field("Conversation font size", font));
  }

  models(panel) {
    panel.append(h("h3", { text: "Models" }));
    const list = h("ul", { class: "providers" });
    for (const p of app.models.providers || []) {
      const edit = h("button", { type: "button", class: "btn small", text: "Edit" });
      edit.addEventListener("click", () => this.showForm(panel, p));
      const remove = h("button", { type: "button", class: "btn small", text: "Remove" });
      remove.addEventListener("click", async () => {
        try {
          await api.removeProvider(p.id);
          await this.reloadModels();
        } catch (err) {
          this.ctx.notify(err.message);
        }
      });
      const status = p.configured ? `configured (key from ${p.keySource === "env" ? "the environment, which outranks the file" : "credentials file"})` : "no key";
      list.append(h("li", { class: "provider", dataset: { providerId: p.id } }, h("span", { class: `dot ${p.configured ? "ok" : "off"}`, "aria-hidden": "true" }), h("span", { class: "provider-name", text: p.label || p.id }), h("span", { class: "muted provider-status", text: status }), edit, remove));
    }
    const add = h("button", { type: "button", class: "btn small" }, icon("plus"), "Add provider");
    add.addEventListener("click", () => this.showForm(panel, null));
    panel.append(list, add, ...this.defaultModelFields());
  }

  /** The default model and effort of new sessions (F41), saved as settings like every other preference. */
  defaultModelFields() {
    const defaults = app.models.defaults || {};
    const models = (app.models.providers || []).flatMap((p) => (p.models || []).map((m) => ({ provider: p, model: m })));
    const isDefault = (e) => e.provider.id === defaults.provider && e.model.id === defaults.model;
    const model = h(
      "select",
      { class: "input", dataset: { defaultRoute: "model" } },
      (app.models.providers || []).filter((p) => p.models?.length).map((p) => h("optgroup", { label: p.label || p.id }, p.models.map((m) => h("option", { value: `${p.id}\u0000${m.id}`, text: m.label || m.id, selected: isDefault({ provider: p, model: m }) })))),
    );
    const chosen = models.find(isDefault)?.model;
    const efforts = chosen?.efforts || [];
    const effort = h("select", { class: "input", disabled: !efforts.length, dataset: { defaultRoute: "effort" } }, efforts.map((id) => h("option", { value: id, text: id === chosen.defaultEffort ? `${id} (the model's default)` : id, selected: id === defaults.effort })));
    model.addEventListener("change", () => {
      const [provider, id] = model.value.split("\u0000");
      this.saveDefaults({ "models.defaultProvider": provider, "models.defaultModel": id, "models.defaultEffort": null }, "model");
    });
    effort.addEventListener("change", () => this.saveDefaults({ "models.defaultEffort": effort.value }, "effort"));
    return [h("h4", { text: "New sessions" }), this.field("Default model", model), this.field("Default effort", effort, efforts.length ? null : "This model has no effort levels.")];
  }

  /** Save default-route settings, then re-read the models so the defaults and the new-session chips follow; focus
   * returns to the `control` that changed ("model" or "effort") in the redrawn tab. */
  async saveDefaults(set, control) {
    try {
      await saveSettings(set);
      await this.reloadModels();
      /** @type {HTMLElement | null} */ (this.dialog.querySelector(`[data-default-route=${control}]`))?.focus();
    } catch (err) {
      this.ctx.notify(err.message);
    }
  }

  /** Show one provider form (Edit or Add) at the end of the Models tab and focus its first field. */
  showForm(panel, p) {
    panel.querySelector(".provider-form")?.remove();
    const form = this.providerForm(p);
    panel.append(form);
    form.querySelector("select, input")?.focus();
  }

  providerForm(p) {
    const kind = h("select", { class: "input" }, [["deepseek", "DeepSeek"], ["openai-compatible", "OpenAI-compatible"]].map(([v, l]) => h("option", { value: v, text: l, selected: p?.kind === v })));
    const pid = h("input", { type: "text", class: "input", value: p?.id || "", disabled: Boolean(p), placeholder: "my-provider" });
    const label = h("input", { type: "text", class: "input", value: p?.label || "" });
    // DeepSeek's address is the one in effect (the environment's, when set); the form does not change it.
    const fixedBase = p?.kind === "deepseek";
    const base = h("input", { type: "url", class: "input", value: p?.baseUrl || "", readonly: fixedBase });
    const baseHint = p?.baseUrlEnv ? `Set by ${p.baseUrlEnv} in the environment, which outranks the profile.` : fixedBase ? "DeepSeek's address; set DEEPSEEK_BASE_URL to change it." : null;
    const key = h("input", { type: "password", class: "input", autocomplete: "off", placeholder: p?.configured ? "Key saved — type to replace" : "" });
    const models = h("textarea", { class: "input", rows: "3", placeholder: "model-id contextWindow efforts… (one per line)" });
    models.value = (p?.models || []).map((m) => [m.id, m.contextWindow || "", ...(m.efforts || [])].join(" ").trim()).join("\n");
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    const form = h("form", { class: "provider-form" }, this.field("Kind", kind), this.field("Id (OpenAI-compatible)", pid), this.field("Label", label), this.field("Base URL", base, baseHint), this.field("API key (write-only)", key), this.field("Models", models, "One per line: id, context window, then efforts"), error, h("button", { type: "submit", class: "btn primary", text: "Save" }));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const body = { kind: kind.value };
      if (!p && pid.value.trim()) body.id = pid.value.trim();
      if (label.value) body.label = label.value;
      if (base.value && !fixedBase) body.baseUrl = base.value;
      if (key.value) body.apiKey = key.value;
      const parsed = models.value.split("\n").map((l) => l.trim().split(/\s+/)).filter((parts) => parts[0]);
      if (parsed.length) body.models = parsed.map(([id, window, ...efforts]) => ({ id, ...(Number(window) ? { contextWindow: Number(window) } : {}), efforts: Number(window) ? efforts : [window, ...efforts].filter(Boolean) }));
      try {
        if (p) await api.editProvider(p.id, body);
        else await api.addProvider(body);
        key.value = "";
        await this.reloadModels();
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
      }
    });
    return form;
  }

  async reloadModels() {
    app.models = await api.models();
    app.emit("models");
    this.render();
  }

  /** Plugin configuration: what the delivery card of cross-session messages shows (spec 09 §7). */
  plugins(panel) {
    const toggle = (key, label) => {
      const box = h("input", { type: "checkbox", checked: app.setting(key, false) === true });
      box.addEventListener("change", () => this.save({ [key]: box.checked }));
      return h("div", { class: "field check" }, h("label", null, box, ` ${label}`));
    };
    panel.append(
      h("h3", { text: "Plugin configuration" }),
      h("h4", { text: "Cross-session messages (agent-message)" }),
      h("p", { class: "hint", text: "A sent message's card always shows its message ID and delivery state." }),
      toggle("agentMessage.showMode", "Show the delivery mode (followup, steer, inject)"),
      toggle("agentMessage.showTargetStatus", "Show the target session's runtime status (running, idle, offline)"),
    );
  }

  about(panel) {
    const info = app.info || {};
    panel.append(
      h("h3", { text: "About" }),
      h("dl", { class: "about" }, h("dt", { text: "Version" }), h("dd", { text: info.version || "" }), h("dt", { text: "Profile" }), h("dd", { text: info.profile || "" }), h("dt", { text: "DSH_HOME" }), h("dd", { text: info.dshHome || "" })),
      h("h4", { text: "Panels and plugins" }),
      h("ul", { class: "panel-status" }, pluginRows(info)),
    );
  }
}

/** The About list: each optional panel and each plugin that failed to load, or one line saying all is well. */
function pluginRows(info) {
  const panels = (app.panels || []).map((p) => `Panel ${p.id}: ${p.status === "ready" ? "ready" : `unavailable: ${p.reason || "unknown reason"}`}`);
  const plugins = (info.unavailablePlugins || []).map((p) => `Plugin ${p.id} (${p.plugin}): unavailable: ${p.reason}`);
  const rows = [...panels, ...plugins];
  if (!plugins.length) rows.push("Every plugin of the profile loaded.");
  return rows.map((text) => h("li", { text }));
}
