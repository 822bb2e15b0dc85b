// `read`: file name and line range; expanded, numbered lines from `meta.lines`.

import { basename, h } from "../dom.js";
import { PREVIEW_LINES, meta, output, resultText } from "./common.js";

export const title = "Read";

export function summary(args, result) {
  const m = meta(result);
  const lines = m.lines || [];
  const range = lines.length ? ` · lines ${lines[0].number}–${lines[lines.length - 1].number}` : "";
  return `${basename(args.file_path || args.path || m.path)}${range}`;
}

export function body(args, result) {
  const lines = meta(result).lines;
  if (!Array.isArray(lines)) return result ? output(resultText(result)) : null;
  const table = h("table", { class: "code-lines" });
  const rows = h("tbody");
  for (const line of lines.slice(0, PREVIEW_LINES)) {
    rows.append(h("tr", null, h("td", { class: "ln", text: line.number }), h("td", { class: "txt", text: line.text })));
  }
  table.append(rows);
  const wrap = h("div", { class: "code-wrap", tabindex: "0", "aria-label": `Lines of ${basename(meta(result).path)}` }, table);
  if (lines.length > PREVIEW_LINES) {
    wrap.append(h("p", { class: "muted", text: `${lines.length - PREVIEW_LINES} more lines not shown` }));
  }
  return wrap;
}
