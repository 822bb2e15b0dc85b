// Helpers shared by the tool card renderers.

import { ansiLines } from "../ansi.js";
import { append, contentText, copyButton, h } from "../dom.js";

export const PREVIEW_LINES = 200;

let sessionCwd = "";

/** Remember the open session's working directory, so cards show paths relative to it. */
export function setCwd(cwd) {
  sessionCwd = String(cwd || "").replace(/\/+$/, "");
}

/** The session's working directory. */
export function cwd() {
  return sessionCwd;
}

/** A path relative to the session's working directory when it lies inside it. */
export function relative(path) {
  const text = String(path || "");
  return sessionCwd && text.startsWith(`${sessionCwd}/`) ? text.slice(sessionCwd.length + 1) : text;
}

/** The result text of a `tool/result` envelope ("" while running). */
export function resultText(result) {
  return result ? contentText(result.data.message?.content) : "";
}

/** Whether the result is an error. */
export function isError(result) {
  return Boolean(result?.data.message?.isError);
}

/** The result's `meta` object ({} when absent). */
export function meta(result) {
  return result?.data.meta || {};
}

/**
 * Monospace output showing its first 200 lines, with "Show all" for the rest, `[stderr]` and marker lines
 * highlighted, and terminal colours as ansi-* classes (other escapes dropped).
 * @param {string} text
 * @param {{label?: string}} [options]
 */
export function output(text, options = {}) {
  const lines = ansiLines(text.replace(/\n+$/, ""));
  const pre = h("pre", { class: "tool-output", tabindex: "0", "aria-label": options.label || "Output" });
  const fill = (count) => {
    pre.replaceChildren();
    let inStderr = false;
    for (const line of lines.slice(0, count)) {
      if (line.text === "[stderr]") inStderr = true;
      const marker = /^\[(exit code|timed out|killed by signal|sandbox|background job|job )/.test(line.text) || line.text === "[stderr]";
      const cls = marker ? "out-marker" : inStderr ? "out-stderr" : null;
      append(pre, [cls ? h("span", { class: cls }, line.nodes) : line.nodes, "\n"]);
    }
  };
  fill(PREVIEW_LINES);
  if (lines.length <= PREVIEW_LINES) return pre;
  const more = h("button", { type: "button", class: "link-btn", text: `Show all ${lines.length} lines` });
  more.addEventListener("click", () => {
    fill(lines.length);
    more.remove();
  });
  return h("div", null, pre, more);
}

/** A labelled copy button for the given text. */
export function copy(text, label = "Copy output") {
  return copyButton(() => text, label);
}
