// Tool cards: one renderer per tool (generic fallback) inside a common shell with name, summary,
// status, duration and Inspect.

import { duration, h, icon, parseArgs, replace } from "../dom.js";
import * as agent from "./agent.js";
import * as bash from "./bash.js";
import { isError, output, resultText } from "./common.js";
import * as generic from "./generic.js";
import * as read from "./read.js";
import * as search from "./search.js";
import * as todo from "./todo.js";
import * as write from "./write.js";

const RENDERERS = {
  read: { title: "Read", icon: "file", ...read },
  bash: { title: "Bash", icon: "terminal", ...bash },
  write: { title: "Write", icon: "pencil", ...write },
  edit: { title: "Edit", icon: "pencil", ...write },
  grep: { title: "Grep", icon: "search", ...search },
  glob: { title: "Glob", icon: "search", ...search },
  todo_write: { title: "Plan", icon: "list", ...todo },
  subagent: { title: "Subagent", icon: "agents", summary: agent.subagentSummary, body: agent.body },
  send_message: { title: "Message", icon: "message", summary: agent.messageSummary, body: agent.body },
  send_agent_message: { title: "Message", icon: "message", summary: agent.agentMessageSummary, body: agent.agentMessageBody },
  ask_user_question: { title: "Ask question", icon: "question", summary: askSummary, body: generic.body },
};

/** The first question asked, then "answered" or "waiting". */
function askSummary(args, result) {
  const first = Array.isArray(args.questions) ? args.questions[0]?.question || "" : "";
  return `${first}${result ? "" : " · waiting"}`;
}

/** The renderer for a tool name (generic fallback). */
export function rendererFor(name) {
  return RENDERERS[name] || { title: name, icon: "tool", ...generic };
}

/** The verb used in a work group's title for a tool name ("read", "ran", "edited"). */
export function tally(name) {
  return { read: "read", bash: "ran", write: "edited", edit: "edited", grep: "searched", glob: "searched", subagent: "delegated" }[name] || "used";
}

/**
 * A tool card for a paired call/result; `update(result)` re-renders it when the result lands.
 * @param {any} call  the `tool/call` envelope
 * @param {any} result  the `tool/result` envelope or null
 * @param {{onInspect: (callId: string) => void}} ctx
 */
export function toolCard(call, result, ctx) {
  const callId = call.data.callId;
  const renderer = rendererFor(call.data.name);
  const card = h("div", { class: "tool-card", dataset: { callId, tool: call.data.name } });
  const head = h("button", { type: "button", class: "tool-head", "aria-expanded": "false" });
  const bodyEl = h("div", { class: "tool-body", hidden: true });
  let current = result;
  let rendered = false;
  const glyph = icon(renderer.icon);

  const paint = () => {
    const args = parseArgs(call.data.arguments);
    // A renderer's `failure` names a failed run the tool does not report as an error (bash's non-zero exit).
    const failed = current && !isError(current) && renderer.failure ? renderer.failure(current) : null;
    const status = !current ? "running" : isError(current) || failed ? "error" : "done";
    card.dataset.status = status;
    const took = current ? duration(current.time - call.time) : "";
    let summary = "";
    try {
      summary = renderer.summary(args, current);
    } catch {
      summary = "";
    }
    replace(
      head,
      glyph,
      h("span", { class: "tool-name", text: renderer.title }),
      summary ? h("span", { class: "tool-summary", text: summary }) : null,
      h("span", { class: `status status-${status}` }, h("span", { class: "status-dot", "aria-hidden": "true" }), failed || status),
      took ? h("span", { class: "tool-time", text: took }) : null,
    );
    if (rendered) fillBody(args);
  };

  const fillBody = (args) => {
    rendered = true;
    let content = null;
    try {
      content = isError(current) ? output(resultText(current), { label: "Error" }) : renderer.body(args, current, call);
    } catch {
      content = generic.body(args, current, call);
    }
    const inspect = h("button", { type: "button", class: "chip-btn inspect" }, icon("code"), "Inspect");
    inspect.addEventListener("click", () => ctx.onInspect(callId));
    replace(bodyEl, content, h("div", { class: "tool-actions" }, inspect));
  };

  head.addEventListener("click", () => {
    const open = head.getAttribute("aria-expanded") !== "true";
    head.setAttribute("aria-expanded", String(open));
    bodyEl.hidden = !open;
    if (open && !rendered) fillBody(parseArgs(call.data.arguments));
  });
  card.append(head, bodyEl);
  paint();
  return {
    el: card,
    update(next) {
      current = next;
      paint();
    },
  };
}
