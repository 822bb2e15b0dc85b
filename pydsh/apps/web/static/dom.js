// The one element-building function every panel uses: text goes in as text nodes, never as HTML, with
// bidi override and isolate characters shown as visible markers so they cannot reorder what is displayed.

const BIDI = /[\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text with each bidi embedding, override or isolate character (U+202A–202E, U+2066–2069) replaced by a
 * visible `⟨U+202E⟩` marker: the characters session titles drop, kept visible here so `gnp.exe` cannot
 * display as `exe.png` in chat text, tool output or file names.
 * @param {string} text
 * @returns {string}
 */
export function visible(text) {
  return text.replace(BIDI, (c) => `⟨U+${c.charCodeAt(0).toString(16).toUpperCase()}⟩`);
}

/**
 * Build an element. `props` keys: `class`, `text`, `on<Event>` handlers, `dataset`, `aria-*`/other attributes,
 * and DOM properties for `hidden`, `value`, `checked`, `disabled`.
 * @param {string} tag
 * @param {Record<string, any> | null} [props]
 * @param {...(Node | string | null | undefined | false | Array<Node | string | null | undefined | false>)} children
 * @returns {HTMLElement}
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = visible(String(value));
      else if (key === "dataset") Object.assign(el.dataset, value);
      else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2).toLowerCase(), value);
      else if (key === "hidden" || key === "value" || key === "checked" || key === "disabled" || key === "selected") el[key] = value;
      else if (key === "title" || key === "aria-label") el.setAttribute(key, visible(String(value)));
      else el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/**
 * Append children (strings become text nodes; falsy values are skipped).
 * @param {Element} el
 * @param {any[]} children
 */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(visible(child)) : child);
  }
}

/**
 * Replace every child of `el`.
 * @param {Element} el
 * @param {...any} children
 */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** The icon sprite's path, worked out once, and one built icon per name to clone (a long turn draws thousands). */
const SPRITE = new URL("icons.svg", import.meta.url).pathname;
const ICONS = new Map();

/**
 * An icon from icons.svg, hidden from assistive technology.
 * @param {string} name
 * @returns {SVGElement}
 */
export function icon(name) {
  let model = ICONS.get(name);
  if (!model) {
    const ns = "http://www.w3.org/2000/svg";
    model = document.createElementNS(ns, "svg");
    model.setAttribute("class", "icon");
    model.setAttribute("aria-hidden", "true");
    model.setAttribute("focusable", "false");
    const use = document.createElementNS(ns, "use");
    use.setAttribute("href", `${SPRITE}#${name}`);
    model.append(use);
    ICONS.set(name, model);
  }
  return /** @type {SVGElement} */ (model.cloneNode(true));
}

/** Announce a message politely (turn completion, errors) or assertively (approvals, questions). */
export function announce(message, assertive = false) {
  const region = document.getElementById(assertive ? "live-assertive" : "live");
  if (!region) return;
  region.textContent = "";
  window.setTimeout(() => { region.textContent = message; }, 30);
}

/** Copy text to the clipboard and flash the button label. */
export async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const area = h("textarea", { class: "sr-only", "aria-hidden": "true" });
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  if (button) {
    const label = button.getAttribute("aria-label");
    button.setAttribute("aria-label", "Copied");
    button.dataset.copied = "1";
    window.setTimeout(() => {
      if (label) button.setAttribute("aria-label", label);
      delete button.dataset.copied;
    }, 1200);
  }
}

/** A small copy button (icon + visually hidden label). */
export function copyButton(getText, label = "Copy") {
  const button = h("button", { type: "button", class: "icon-btn", "aria-label": label, title: label });
  button.append(icon("copy"));
  button.addEventListener("click", () => copyText(getText(), button));
  return button;
}

/** Epoch ms → "HH:MM" in the browser's zone. */
export function clock(ms) {
  const d = new Date(ms);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

/** Relative age for the sidebar: now, N min, N h, N d, then a date. */
export function age(ms, now = Date.now()) {
  const s = Math.max(0, (now - ms) / 1000);
  if (s < 60) return "now";
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  if (s < 86400 * 30) return `${Math.floor(s / 86400)} d`;
  return new Date(ms).toLocaleDateString();
}

/** A duration in ms as "850 ms", "4s", "2m 5s". */
export function duration(ms) {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m ${s % 60}s`;
}

/** Pretty-print JSON text or a value; returns the input unchanged when it is not JSON. */
export function prettyJson(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

/** Parse tool-call arguments (a JSON string) into an object; `{}` on failure. */
export function parseArgs(text) {
  if (text && typeof text === "object") return text;
  try {
    const value = JSON.parse(text || "{}");
    return value && typeof value === "object" ? value : {};
  } catch {
    return {};
  }
}

/** The text blocks of a message content array, a blank line apart (as the model reads them), so blocks never run together. */
export function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((b) => b && b.type === "text" && b.text).map((b) => b.text).join("\n\n");
}

/** The last path segment. */
export function basename(path) {
  const parts = String(path || "").split(/[\\/]/).filter(Boolean);
  return parts.length ? parts[parts.length - 1] : String(path || "");
}
