// Fallback card: name, arguments as formatted JSON, result text.

import { h, prettyJson } from "../dom.js";
import { output, resultText } from "./common.js";

export function summary(args) {
  const first = Object.values(args).find((v) => typeof v === "string");
  return first ? String(first).slice(0, 80) : "";
}

export function body(args, result, call) {
  return h(
    "div",
    null,
    h("pre", { class: "tool-output json", tabindex: "0", "aria-label": "Arguments", text: prettyJson(call?.data.arguments || args) }),
    result ? output(resultText(result)) : null,
  );
}
