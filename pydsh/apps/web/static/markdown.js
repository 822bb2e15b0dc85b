// Model text as Markdown (CommonMark + GFM tables, task lists, strikethrough and bare URLs). The vendored
// `marked` lexer only tokenises; this module builds the DOM from its tokens itself, so the library's HTML
// output is never used: raw HTML shows as text, links keep only http(s)/mailto targets, images become
// links (nothing is fetched), and terminal escapes are dropped before parsing.

import { stripAnsi } from "./ansi.js";
import { h } from "./dom.js";
import { Lexer } from "./vendor/marked.esm.js";

const OPTIONS = { gfm: true, breaks: true };
const SAFE_LINK = /^(https?:|mailto:)/i;
const ENTITY = /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|(amp|lt|gt|quot|apos|nbsp));/g;
const NAMED = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

/**
 * Render Markdown text into a fragment of DOM nodes.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  out.append(...blocks(Lexer.lex(stripAnsi(String(text || "").replace(/\r\n?/g, "\n")), OPTIONS)));
  return out;
}

/**
 * Render inline Markdown of one line.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function inline(text) {
  const out = document.createDocumentFragment();
  out.append(...inlines(Lexer.lexInline(stripAnsi(String(text || "")), OPTIONS)));
  return out;
}

/** The nodes of a list of block tokens (tokens that render to nothing are skipped). */
function blocks(tokens) {
  return tokens.map(block).filter((node) => node !== null);
}

/** One block token as a node; unknown token types show their source text. */
function block(token) {
  switch (token.type) {
    case "paragraph":
      return h("p", null, inlines(token.tokens));
    case "heading":
      return h(`h${Math.min(6, token.depth + 2)}`, { class: "md-heading" }, inlines(token.tokens));
    case "code":
      return codeBlock(token);
    case "blockquote":
      return h("blockquote", null, blocks(token.tokens));
    case "list":
      return list(token);
    case "table":
      return table(token);
    case "hr":
      return h("hr");
    case "html":
      return h("p", { class: "md-raw", text: token.text.replace(/\n+$/, "") });
    case "text":
      return token.tokens ? h("span", null, inlines(token.tokens)) : h("span", { text: decode(token.text) });
    case "checkbox":
      return checkbox(token.checked);
    case "space":
    case "def":
      return null;
    default:
      return token.raw ? h("p", { text: token.raw }) : null;
  }
}

function codeBlock(token) {
  const lang = String(token.lang || "").split(/\s/)[0];
  return h("pre", { class: "code-block", dataset: lang ? { lang } : null }, h("code", { text: token.text }));
}

/** A list, nested lists kept inside their items; tight items hold their text without a paragraph. */
function list(token) {
  const start = token.ordered && token.start !== "" && token.start !== 1 ? token.start : null;
  return h(
    token.ordered ? "ol" : "ul",
    { start },
    token.items.map((item) => h("li", { class: item.task ? "md-task" : null }, blocks(item.tokens))),
  );
}

/** A GFM table in a horizontally scrolling wrapper, so a wide table never widens the chat. */
function table(token) {
  const cell = (tag, c) => h(tag, { class: c.align ? `md-align-${c.align}` : null, scope: tag === "th" ? "col" : null }, inlines(c.tokens));
  return h(
    "div",
    { class: "md-table-wrap" },
    h(
      "table",
      { class: "md-table" },
      h("thead", null, h("tr", null, token.header.map((c) => cell("th", c)))),
      token.rows.length ? h("tbody", null, token.rows.map((row) => h("tr", null, row.map((c) => cell("td", c))))) : null,
    ),
  );
}

/** A task-list mark as text (a read-only state, not a form control). */
function checkbox(checked) {
  return h("span", { class: "md-check", role: "img", "aria-label": checked ? "done" : "to do", text: checked ? "☑" : "☐" });
}

/** The nodes of a list of inline tokens. */
function inlines(tokens) {
  return (tokens || []).map(inlineToken);
}

/** One inline token as a node or text; raw HTML tags stay text. */
function inlineToken(token) {
  switch (token.type) {
    case "text":
      return token.tokens ? h("span", null, inlines(token.tokens)) : decode(token.text);
    case "escape":
      return decode(token.text);
    case "strong":
      return h("strong", null, inlines(token.tokens));
    case "em":
      return h("em", null, inlines(token.tokens));
    case "del":
      return h("del", null, inlines(token.tokens));
    case "codespan":
      return h("code", { text: token.text });
    case "br":
      return h("br");
    case "link":
      return link(token.href, token.title, inlines(token.tokens));
    case "image":
      return link(token.href, token.title, [token.text || token.href]);
    case "checkbox":
      return checkbox(token.checked);
    default:
      return token.raw || "";
  }
}

/** A link to an http(s) or mailto target; any other target keeps only its label, whole. */
function link(href, title, label) {
  const target = String(href || "").trim();
  if (!SAFE_LINK.test(target)) return h("span", null, label);
  return h("a", { href: target, title: title || null, rel: "noopener noreferrer", target: "_blank" }, label);
}

/** Character references the lexer leaves in text (`&amp;`, `&#39;`, …) as the characters they name. */
function decode(text) {
  return String(text).replace(ENTITY, (whole, dec, hex, name) => {
    if (name) return NAMED[name];
    const code = dec ? Number(dec) : Number.parseInt(hex, 16);
    return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : "\ufffd";
  });
}
