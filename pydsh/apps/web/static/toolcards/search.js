// `glob` / `grep`: pattern and match count; expanded, the result text.

import { output, resultText } from "./common.js";

export function summary(args, result) {
  const pattern = args.pattern || args.query || "";
  if (!result) return pattern;
  const text = resultText(result).trim();
  const count = text && !/^no (files|matches)/i.test(text) ? text.split("\n").filter((l) => l.trim()).length : 0;
  return `${pattern} · ${count} ${count === 1 ? "result" : "results"}`;
}

export function body(args, result) {
  return result ? output(resultText(result)) : null;
}
