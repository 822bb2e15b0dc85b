// Terminal escapes in tool output and model text: SGR colours and weights become CSS classes (the
// foreground hue only, mapped onto the theme's palette so contrast holds in both themes); every other
// escape sequence is dropped, so no raw ESC glyph reaches the page.

import { h } from "./dom.js";

const ESCAPES = /(?:\x1b\[|\x9b)([0-?]*)[ -/]*([@-~])|(?:\x1b\]|\x9d)[^\x07\x1b]*(?:\x07|\x1b\\|$)|\x1b[@-_]?/g;
const BASIC = [null, "red", "green", "yellow", "blue", "magenta", "cyan", null];

/**
 * The text without any terminal escape sequence.
 * @param {string} text
 * @returns {string}
 */
export function stripAnsi(text) {
  return String(text || "").replace(ESCAPES, "");
}

/**
 * Split text into lines of styled runs, carrying the SGR state across lines.
 * @param {string} text
 * @returns {{text: string, nodes: Array<string | HTMLElement>}[]}
 */
export function ansiLines(text) {
  const lines = [{ text: "", nodes: [] }];
  let style = plain();
  let last = 0;
  const push = (chunk) => {
    chunk.split("\n").forEach((part, i) => {
      if (i) lines.push({ text: "", nodes: [] });
      if (!part) return;
      const line = lines[lines.length - 1];
      line.text += part;
      line.nodes.push(run(part, style));
    });
  };
  for (const m of String(text || "").matchAll(ESCAPES)) {
    push(text.slice(last, m.index));
    if (m[2] === "m") style = sgr(style, m[1]);
    last = m.index + m[0].length;
  }
  push(String(text || "").slice(last));
  return lines;
}

function plain() {
  return { fg: null, bold: false, italic: false, underline: false };
}

/** A run of text: a bare string when unstyled, else a span with the ansi-* classes of its style. */
function run(text, style) {
  const classes = [style.fg && `ansi-${style.fg}`, style.bold && "ansi-bold", style.italic && "ansi-italic", style.underline && "ansi-underline"].filter(Boolean);
  return classes.length ? h("span", { class: classes.join(" "), text }) : text;
}

/** Apply one SGR parameter list (`1;31`, `38;5;208`, `38;2;r;g;b`) to a style. */
function sgr(style, params) {
  const codes = (params || "0").split(/[;:]/).map((p) => Number(p) || 0);
  let next = { ...style };
  for (let i = 0; i < codes.length; i++) {
    const code = codes[i];
    if (code === 0) next = plain();
    else if (code === 1) next.bold = true;
    else if (code === 22) next.bold = false;
    else if (code === 3) next.italic = true;
    else if (code === 23) next.italic = false;
    else if (code === 4) next.underline = true;
    else if (code === 24) next.underline = false;
    else if (code >= 30 && code <= 37) next.fg = BASIC[code - 30];
    else if (code >= 90 && code <= 97) next.fg = code === 90 ? "grey" : BASIC[code - 90];
    else if (code === 39) next.fg = null;
    else if (code === 38 || code === 48) {
      const [colour, used] = extended(codes, i + 1);
      if (code === 38) next.fg = colour;
      i += used;
    }
  }
  return next;
}

/** An extended colour (`5;n` or `2;r;g;b`) starting at codes[at]: [hue or null, parameters used]. */
function extended(codes, at) {
  if (codes[at] === 5) return [indexed(codes[at + 1] || 0), 2];
  if (codes[at] === 2) return [hue(codes[at + 1] || 0, codes[at + 2] || 0, codes[at + 3] || 0), 4];
  return [null, 0];
}

/** A 256-colour index as one of the palette's hues. */
function indexed(n) {
  if (n < 8) return BASIC[n];
  if (n < 16) return n === 8 ? "grey" : BASIC[n - 8];
  if (n >= 232) return "grey";
  const level = (v) => (v ? 55 + v * 40 : 0);
  const c = n - 16;
  return hue(level(Math.floor(c / 36)), level(Math.floor(c / 6) % 6), level(c % 6));
}

/** The nearest palette hue of an RGB colour (greys and near-black/white fall back to the default). */
function hue(r, g, b) {
  const max = Math.max(r, g, b);
  const min = Math.min(r, g, b);
  if (max - min < 40) return max < 90 || max > 200 ? null : "grey";
  let angle;
  if (max === r) angle = ((g - b) / (max - min)) * 60;
  else if (max === g) angle = ((b - r) / (max - min)) * 60 + 120;
  else angle = ((r - g) / (max - min)) * 60 + 240;
  angle = (angle + 360) % 360;
  if (angle < 20 || angle >= 330) return "red";
  if (angle < 70) return "yellow";
  if (angle < 160) return "green";
  if (angle < 200) return "cyan";
  if (angle < 260) return "blue";
  return "magenta";
}
