// Unified line diffs of `meta.diffs` entries (oldText → newText) with line numbers and +/− gutters.

import { h } from "./dom.js";

const MAX_CELLS = 4_000_000;

/**
 * Line operations between two texts: [{op: " " | "+" | "-", text, oldNo?, newNo?}].
 * @param {string} oldText
 * @param {string} newText
 */
export function diffLines(oldText, newText) {
  const a = splitLines(oldText);
  const b = splitLines(newText);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops = [];
  for (let i = 0; i < start; i++) ops.push({ op: " ", text: a[i], oldNo: i + 1, newNo: i + 1 });
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const middle = midA.length * midB.length > MAX_CELLS ? replaceAll(midA, midB) : lcs(midA, midB);
  for (const op of middle) {
    ops.push({ ...op, oldNo: op.oldNo === undefined ? undefined : op.oldNo + start + 1, newNo: op.newNo === undefined ? undefined : op.newNo + start + 1 });
  }
  for (let i = endA, j = endB; i < a.length; i++, j++) ops.push({ op: " ", text: a[i], oldNo: i + 1, newNo: j + 1 });
  return ops;
}

function splitLines(text) {
  if (!text) return [];
  const lines = String(text).split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

function replaceAll(a, b) {
  return [...a.map((text, i) => ({ op: "-", text, oldNo: i })), ...b.map((text, j) => ({ op: "+", text, newNo: j }))];
}

function lcs(a, b) {
  const n = a.length;
  const m = b.length;
  const table = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
    }
  }
  const ops = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      ops.push({ op: " ", text: a[i], oldNo: i, newNo: j });
      i++;
      j++;
    } else if (i < n && (j >= m || table[i + 1][j] >= table[i][j + 1])) {
      ops.push({ op: "-", text: a[i], oldNo: i });
      i++;
    } else {
      ops.push({ op: "+", text: b[j], newNo: j });
      j++;
    }
  }
  return ops;
}

/**
 * Render a diff as a table: old and new line numbers, a +/− gutter and the text.
 * Unchanged runs longer than 6 lines are folded to 3 lines of context.
 * @param {string | null} oldText
 * @param {string} newText
 * @returns {HTMLElement}
 */
export function renderDiff(oldText, newText) {
  const ops = diffLines(oldText || "", newText || "");
  const table = h("table", { class: "diff" });
  const body = h("tbody");
  table.append(h("caption", { class: "sr-only", text: "Changes: lines marked + were added, lines marked − were removed" }), body);
  ops.forEach((op, k) => {
    if (op.op === " " && !near(ops, k)) {
      if (k === 0 || near(ops, k - 1)) body.append(h("tr", { class: "diff-gap" }, h("td", { colspan: "4", text: "⋯" })));
      return;
    }
    const sign = op.op === "+" ? "+" : op.op === "-" ? "−" : " ";
    const cls = op.op === "+" ? "add" : op.op === "-" ? "del" : "ctx";
    body.append(
      h(
        "tr",
        { class: `diff-${cls}` },
        h("td", { class: "ln", text: op.oldNo ?? "" }),
        h("td", { class: "ln", text: op.newNo ?? "" }),
        h("td", { class: "sign", text: sign }),
        h("td", { class: "txt", text: op.text }),
      ),
    );
  });
  return table;
}

function near(ops, k) {
  for (let d = -3; d <= 3; d++) {
    const op = ops[k + d];
    if (op && op.op !== " ") return true;
  }
  return ops.length <= 6;
}
