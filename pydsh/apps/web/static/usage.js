// The usage footer: turns, steps, tok/s │ tokens, cache hit │ context %, from the server's projections.

import { h, icon, replace } from "./dom.js";

/** The context pressure as a whole percent (pressure ÷ window), or null. */
export function contextPercent(pressure) {
  if (typeof pressure === "number") return Math.round(pressure);
  if (!pressure || !pressure.contextWindow) return null;
  const tokens = pressure.pressureTokens ?? pressure.projectedTokens;
  if (tokens === undefined || tokens === null) return null;
  return Math.round((tokens / pressure.contextWindow) * 100);
}

/** The usage footer. */
export class UsageFooter {
  /** @param {HTMLElement} footer */
  constructor(footer) {
    this.footer = footer;
  }

  /** @param {import("./store.js").SessionStore | null} store */
  render(store) {
    if (!store) {
      replace(this.footer);
      return;
    }
    const p = store.projections || {};
    const stats = p.sessionStats || {};
    const summary = store.summary?.stats || {};
    let turns = stats.turns ?? summary.turns;
    let steps = stats.steps ?? summary.steps;
    let output = 0;
    let modelMs = 0;
    let stepStart = null;
    let countedTurns = 0;
    let countedSteps = 0;
    for (const ev of store.events) {
      if (ev.type === "turn/start") countedTurns++;
      else if (ev.type === "step/start") {
        countedSteps++;
        stepStart = ev.time;
      } else if (ev.type === "assistant/message" && ev.data.usage && stepStart !== null) {
        output += ev.data.usage.outputTokens || 0;
        modelMs += Math.max(1, ev.time - stepStart);
      }
    }
    if (turns === undefined || (store.firstSeq === 0 && countedTurns > turns)) turns = countedTurns;
    if (steps === undefined || (store.firstSeq === 0 && countedSteps > steps)) steps = countedSteps;
    const u = p.tokenUsage || {};
    const input = u.uncachedInputTokens ?? u.inputTokens ?? 0;
    const cacheRead = u.cacheReadTokens || 0;
    const cacheWrite = u.cacheWriteTokens || 0;
    const tokens = input + cacheRead + cacheWrite + (u.outputTokens || 0);
    const prompt = input + cacheRead + cacheWrite;
    const hit = prompt ? `${Math.round((cacheRead / prompt) * 100)}%` : "—";
    const pct = contextPercent(p.contextPressure);
    const threshold = p.compaction?.thresholdTokens;
    const pressureTokens = p.contextPressure?.pressureTokens;
    const breakdown = p.contextBreakdown || {};
    const window = p.contextPressure?.contextWindow;
    const hover = [
      breakdown.systemTokens !== undefined ? `system ${breakdown.systemTokens}` : null,
      breakdown.toolsTokens !== undefined ? `tools ${breakdown.toolsTokens}` : null,
      breakdown.messageTokens !== undefined ? `messages ${breakdown.messageTokens}` : null,
      window ? `window ${window}` : null,
      threshold ? `compacts at ${threshold}` : null,
    ].filter(Boolean).join(" · ");
    const rate = modelMs ? Math.round(output / (modelMs / 1000)) : 0;
    const warn = threshold && pressureTokens !== undefined ? pressureTokens >= threshold * 0.9 : pct !== null && pct >= 80;
    replace(
      this.footer,
      h("span", { class: "usage-part" }, icon("gauge"), h("span", { class: "usage-counts", text: `${turns} turns ${steps} steps` }), ` · ${rate} tok/s`),
      h("span", { class: "usage-sep", "aria-hidden": "true", text: "│" }),
      h("span", { class: "usage-part" }, icon("database"), h("span", { class: "usage-tokens", text: `${tokens} tok` }), " · ", h("span", { class: "usage-cache", text: `Cache hit ${hit}` })),
      h("span", { class: "usage-sep", "aria-hidden": "true", text: "│" }),
      h("span", { class: `usage-part usage-context${warn ? " warn" : ""}`, title: hover || "No context measurement yet", tabindex: "0", "aria-label": `context ${pct === null ? "unknown" : `${pct}%`}${hover ? `: ${hover}` : ""}` }, icon("circle"), `context ${pct === null ? "—" : `${pct}%`}`),
    );
  }
}
