// Agent-to-agent message cards: "From <name>" cards for relays, team messages, cross-session messages
// and settled-subagent notices, without repeating the framing the model sees.

import { clock, contentText, h, icon } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const RELAY = /^Agent (\S+) sent a message: ?/;
const TEAM = /^Team message from ([^:\n]+):\s*/;
const DSH = /^<dsh-agent-message>[^\n]*<\/dsh-agent-message>\n\n/;
const SETTLED = /subagent (\S+?) (finished|failed|stopped|ran out|was declined|declined)/i;

/**
 * Sender name, headline and body of an agent-to-agent message.
 * @param {any} message
 * @returns {{name: string, body: string, label?: string, headline?: string, folded?: boolean}}
 */
export function parseMessage(message) {
  const source = message.source || {};
  const text = contentText(message.content);
  if (source.kind === "dsh-agent-message") {
    const name = source.senderTitle || source.senderSessionId || "another session";
    return { name, label: `From Session · ${name}`, body: text.replace(DSH, "") };
  }
  if (source.kind === "team-message" || TEAM.test(text)) {
    const m = text.match(TEAM);
    if (m) return { name: m[1].trim(), body: text.slice(m[0].length) };
  }
  if (source.kind === "subagent-settled") {
    const m = text.match(SETTLED);
    const name = m ? m[1] : source.senderName || "subagent";
    const failed = /failed|error/i.test(m ? m[2] : text.slice(0, 200));
    const headline = failed ? `${name} failed before it finished` : `${name} finished`;
    const closing = text.split(/Its closing message:\s*/)[1];
    return { name, body: closing !== undefined ? closing : text, headline, folded: true };
  }
  const m = text.match(RELAY);
  if (m) return { name: m[1], body: text.slice(m[0].length) };
  return { name: source.senderName || "another agent", body: text };
}

/**
 * A left-aligned card headed "From <name>"; the name opens the sender's session.
 * @param {any} message
 * @param {any} ev
 * @param {(id: string) => void} openSession
 */
export function messageCard(message, ev, openSession) {
  const parsed = parseMessage(message);
  const sender = message.source?.senderSessionId;
  const label = parsed.label || `From ${parsed.name}`;
  const from = sender
    ? h("button", { type: "button", class: "link-btn from-btn", title: "Open the sender's session", text: label })
    : h("span", { class: "from-name", text: label });
  if (sender) from.addEventListener("click", () => openSession(sender));
  const card = h(
    "article",
    { class: "message-card", dataset: { seq: ev.seq, kind: message.source?.kind || "" }, "aria-label": `Message from ${parsed.name}` },
    h("header", { class: "message-head" }, icon("message"), from, h("time", { text: clock(ev.time) })),
  );
  if (parsed.headline) {
    card.append(h("p", { class: "message-headline", text: parsed.headline }));
    if (parsed.body) card.append(h("details", { class: "message-fold" }, h("summary", null, "Closing message"), h("div", { class: "markdown" }, renderMarkdown(parsed.body))));
  } else {
    card.append(h("div", { class: "markdown message-body" }, renderMarkdown(parsed.body)));
  }
  return card;
}

/**
 * Optional Messages panel (the agent-message plugin): this session's outgoing cross-session messages with
 * their delivery state, as the page reads them when a session opens and as its stream pushes them.
 * Loaded with import() in its own error boundary.
 * @param {HTMLElement} slot
 * @param {{api: any, openSession: (id: string) => void}} ctx
 */
export function mount(slot, ctx) {
  slot.hidden = true;
  const render = (messages) => {
    if (!messages.length) {
      slot.replaceChildren();
      slot.hidden = true;
      return;
    }
    slot.hidden = false;
    slot.replaceChildren(
      h("h2", { class: "panel-title", text: "Sent messages" }),
      h(
        "ul",
        { class: "team-members" },
        messages.map((m) => {
          const to = h("button", { type: "button", class: "link-btn", text: `To ${m.toTitle || m.to}` });
          to.addEventListener("click", () => ctx.openSession(m.to));
          return h("li", { class: "team-member", dataset: { messageId: m.messageId } }, to, h("span", { class: "chip", text: m.state }), h("span", { class: "muted", text: ` ${m.mode || ""} · ${clock(m.sentAt)}` }));
        }),
      ),
    );
  };
  return {
    session() {
      render([]);
    },
    messages(view) {
      render(view.messages || []);
    },
  };
}
