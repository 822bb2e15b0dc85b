// `write` / `edit`: path and Created / Updated; expanded, a unified diff from `meta.diffs`.

import { basename, h } from "../dom.js";
import { renderDiff } from "../diff.js";
import { meta, output, relative, resultText } from "./common.js";

export function summary(args, result) {
  const m = meta(result);
  const name = basename(args.file_path || args.path || m.path);
  if (!result) return name;
  const verb = m.operation === "create" ? "Created" : m.operation === "update" ? "Updated" : "";
  return verb ? `${name} · ${verb}` : name;
}

export function body(args, result) {
  const diffs = meta(result).diffs;
  if (!Array.isArray(diffs) || !diffs.length) {
    if (result) return output(resultText(result));
    return args.content ? output(String(args.content), { label: "Content" }) : null;
  }
  return h(
    "div",
    { class: "diffs" },
    diffs.map((d) =>
      h("div", { class: "diff-file" }, h("div", { class: "diff-path", text: relative(d.path) }), h("div", { class: "code-wrap", tabindex: "0", "aria-label": `Changes to ${basename(d.path)}` }, renderDiff(d.oldText, d.newText))),
    ),
  );
}
