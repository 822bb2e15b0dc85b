// A small Markdown renderer that builds DOM nodes (never innerHTML): paragraphs, headings, lists,
// quotes, fenced code, inline code, emphasis and http(s)/mailto links.

import { h } from "./dom.js";

const SAFE_LINK = /^(https?:|mailto:)/i;

/**
 * Render Markdown text into a fragment of DOM nodes.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)/);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      out.append(h("pre", { class: "code-block", dataset: fence[2] ? { lang: fence[2] } : null }, h("code", { text: body.join("\n") })));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      const level = Math.min(6, heading[1].length + 2);
      out.append(h(`h${level}`, { class: "md-heading" }, inline(heading[2])));
      i++;
      continue;
    }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? "ol" : "ul");
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
        list.append(h("li", null, inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ""))));
        i++;
      }
      out.append(list);
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*>\s?/, ""));
      out.append(h("blockquote", null, renderMarkdown(quoted.join("\n"))));
      continue;
    }
    if (/^\s*([-*_])\1{2,}\s*$/.test(line)) {
      out.append(h("hr"));
      i++;
      continue;
    }
    if (!line.trim()) {
      i++;
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !/^\s*(```|~~~|#{1,6}\s|>|([-*+]|\d+[.)])\s+)/.test(lines[i])) {
      para.push(lines[i++]);
    }
    if (!para.length) para.push(lines[i++]);
    const p = h("p");
    para.forEach((text, n) => {
      if (n) p.append(h("br"));
      p.append(inline(text));
    });
    out.append(p);
  }
  return out;
}

const INLINE = /(`+)([\s\S]*?)\1|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

/**
 * Render inline Markdown of one line.
 * @param {string} text
 * @returns {DocumentFragment}
 */
export function inline(text) {
  const out = document.createDocumentFragment();
  let rest = text;
  while (rest) {
    const m = rest.match(INLINE);
    if (!m) {
      out.append(rest);
      break;
    }
    if (m.index) out.append(rest.slice(0, m.index));
    if (m[1]) out.append(h("code", { text: m[2] }));
    else if (m[3] || m[4]) out.append(h("strong", null, inline(m[3] || m[4])));
    else if (m[5] || m[6]) out.append(h("em", null, inline(m[5] || m[6])));
    else if (m[7]) out.append(link(m[8], m[7]));
    else if (m[9]) out.append(link(m[9], m[9]));
    rest = rest.slice(m.index + m[0].length);
  }
  return out;
}

function link(href, label) {
  if (!SAFE_LINK.test(href)) return document.createTextNode(label);
  return h("a", { href, rel: "noopener noreferrer", target: "_blank", text: label });
}
