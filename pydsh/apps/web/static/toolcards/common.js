// Helpers shared by the tool card renderers.

import { ansiLines } from "../ansi.js";
import { append, contentText, copyButton, h } from "../dom.js";

export const PREVIEW_LINES = 200;
const TRUNCATED = /^\[output truncated; full output: (.*)\]$/;
const OMITTED = /^\(Omitted (\d+) bytes\. Full formatted result stored at: (.*?)\. Use read/;
const GAP = "[...]";

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
 * highlighted, terminal colours as ansi-* classes (other escapes dropped), and a note on top when the
 * tools cut it.
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
  const note = truncationNote(lines.map((line) => line.text));
  if (lines.length <= PREVIEW_LINES) return note ? h("div", null, note, pre) : pre;
  const more = h("button", { type: "button", class: "link-btn", text: `Show all ${lines.length} lines` });
  more.addEventListener("click", () => {
    fill(lines.length);
    more.remove();
  });
  return h("div", null, note, pre, more);
}

/**
 * A note for the top of output the tools cut, which they say only at the end: bash keeps a stream's tail (a marker line
 * ends the stream's part) and a long result keeps its head and tail around "[...]" (a notice ends it). Which part, how
 * much and where the full text was saved; null when nothing was cut.
 * @param {string[]} lines
 */
function truncationNote(lines) {
  const parts = [];
  let start = 0;
  let stream = lines.includes("[stderr]") ? "stdout" : "the output";
  lines.forEach((line, i) => {
    if (line === "[stderr]") {
      start = i + 1;
      stream = "stderr";
    }
    const cut = line.match(TRUNCATED);
    if (cut) {
      const kept = lines.slice(start, i);
      const size = kept.includes(GAP) ? "" : ` (${kilobytes(new TextEncoder().encode(kept.join("\n")).length)}, ${kept.length.toLocaleString("en")} lines)`;
      parts.push(`only the end of ${stream} was kept${size}; ${cut[1] === "(unavailable)" ? "the full output could not be saved" : `full output: ${cut[1]}`}`);
    }
    const omitted = line.match(OMITTED);
    if (omitted) parts.push(`${kilobytes(Number(omitted[1]))} in the middle are left out here; full result: ${omitted[2]}`);
  });
  return parts.length ? h("p", { class: "out-note", role: "note" }, `Output truncated — ${parts.join(". ")}.`) : null;
}

/** Bytes as "62.5 KB" (one decimal below 100 KB). */
function kilobytes(bytes) {
  const kb = bytes / 1000;
  return `${kb < 100 ? kb.toFixed(1) : Math.round(kb)} KB`;
}

/** A labelled copy button for the given text. */
export function copy(text, label = "Copy output") {
  return copyButton(() => text, label);
}
