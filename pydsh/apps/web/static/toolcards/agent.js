// `subagent`: "Started <name> — <description>"; `send_message` / `send_agent_message`: "To <name>",
// a preview and the delivery state.

import { h, parseArgs } from "../dom.js";
import { meta, output, resultText } from "./common.js";

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
  if (m.state) return m.state;
  const parsed = parseArgs(resultText(result));
  if (parsed.state) return parsed.state;
  const match = resultText(result).match(/\b(accepted|queued|pending|claimed|discarded|delivered|sent)\b/i);
  return match ? match[1].toLowerCase() : "";
}

export function body(args, result) {
  return h("div", null, h("p", { class: "msg-preview", text: String(args.message || args.content || args.prompt || "") }), result ? output(resultText(result)) : null);
}
