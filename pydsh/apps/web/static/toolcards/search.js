// `glob` / `grep`: pattern and the count the tool reports; expanded, the result text.

import { output, resultText } from "./common.js";

/**
 * The number of results a glob or grep result reports: grep's "Found N matches" / "Found N of M matches", glob's
 * "(Showing N of M paths …)" footer, else one path per line.
 * @param {string} text
 */
export function resultCount(text) {
  const grep = text.match(/^Found (\d+)(?: of (\d+))? match/);
  if (grep) return Number(grep[2] || grep[1]);
  const capped = text.match(/\(Showing \d+ of (\d+) paths/);
  if (capped) return Number(capped[1]);
  if (!text || /^no (files|matches)/i.test(text)) return 0;
  return text.split("\n").filter((l) => l.trim()).length;
}

export function summary(args, result) {
  const pattern = args.pattern || args.query || "";
  if (!result) return pattern;
  const count = resultCount(resultText(result).trim());
  return `${pattern} · ${count} ${count === 1 ? "result" : "results"}`;
}

export function body(args, result) {
  return result ? output(resultText(result)) : null;
}
