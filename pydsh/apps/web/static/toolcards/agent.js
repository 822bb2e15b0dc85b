// `subagent`: "Started <name> — <description>"; `send_message` / `send_agent_message`: "To <name>",
// a preview and the delivery state. A `send_agent_message` card also shows its selectable message id, the
// state pushed live by the session stream and, when Settings asks, the mode and the target's runtime status.

import { copyButton, h, parseArgs } from "../dom.js";
import { app } from "../store.js";
import { meta, output, resultText } from "./common.js";

/** @type {Map<string, any>} messageId → the latest delivery entry pushed for the open session */
const deliveries = new Map();

/** Take the open session's delivery entries (`{messageId, to, toTitle, mode, state, targetRuntimeStatus?}`). */
export function setDeliveries(list) {
  deliveries.clear();
  for (const entry of list) deliveries.set(entry.messageId, entry);
}

export function subagentSummary(args, result) {
  const m = meta(result);
  const match = resultText(result).match(/started subagent (\S+)/i);
  const name = m.name || match?.[1] || args.name || "a subagent";
  return `Started ${name} — ${args.description || ""}`.replace(/ — $/, "");
}

export function messageSummary(args, result) {
  const to = args.agent || args.target || args.to || "";
  const text = String(args.message || args.content || "");
  const preview = text.length > 60 ? `${text.slice(0, 60)}…` : text;
  const state = deliveryState(result);
  return `To ${to} · ${preview}${state ? ` · ${state}` : ""}`;
}

/** The delivery state of a message result (accepted, queued, pending, claimed, discarded). */
export function deliveryState(result) {
  if (!result) return "";
  const m = meta(result);
  const pushed = m.messageId ? deliveries.get(m.messageId) : null;
  if (pushed?.state) return pushed.state;
  if (m.state) return m.state;
  const parsed = parseArgs(resultText(result));
  if (parsed.state) return parsed.state;
  const match = resultText(result).match(/\b(accepted|queued|pending|claimed|discarded|delivered|sent)\b/i);
  return match ? match[1].toLowerCase() : "";
}

export function body(args, result) {
  return h("div", null, h("p", { class: "msg-preview", text: String(args.message || args.content || args.prompt || "") }), result ? output(resultText(result)) : null);
}

/** "To <session title>", a preview, the live state, and the mode and target status when Settings asks. */
export function agentMessageSummary(args, result) {
  const m = meta(result);
  const pushed = m.messageId ? deliveries.get(m.messageId) : null;
  const text = String(args.content || "");
  const parts = [`To ${pushed?.toTitle || args.to || ""}`, text.length > 60 ? `${text.slice(0, 60)}…` : text];
  const state = deliveryState(result);
  if (state) parts.push(state);
  if (result && app.setting("agentMessage.showMode", false)) parts.push(`mode ${pushed?.mode || m.mode || args.mode || "followup"}`);
  const status = pushed?.targetRuntimeStatus || m.targetRuntimeStatus;
  if (status && app.setting("agentMessage.showTargetStatus", false)) parts.push(`target ${status}`);
  return parts.join(" · ");
}

/** The message, its selectable id (with Copy) once accepted, then the result text. */
export function agentMessageBody(args, result) {
  const id = meta(result).messageId;
  const idRow = id ? h("p", { class: "message-id-row" }, h("span", { class: "muted", text: "Message ID " }), h("code", { class: "message-id", tabindex: "0", text: id }), copyButton(() => id, "Copy message ID")) : null;
  return h("div", null, h("p", { class: "msg-preview", text: String(args.content || "") }), idRow, result ? output(resultText(result)) : null);
}
