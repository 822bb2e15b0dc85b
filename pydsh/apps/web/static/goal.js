// The goal chip in the session header, from the session's `goal` projection (folded from its goal/change
// records and the automatic rounds' prompts): the phase, the objective and the round budget; hidden without a goal.

import { h, icon, replace } from "./dom.js";

const PHASES = { active: "Ongoing goal", paused: "Paused goal", blocked: "Blocked goal", complete: "Completed goal" };

/** The text of a goal view's parts: `{phase, objective, rounds, reason}`. */
export function goalText(view) {
  const goal = view.goal;
  const rounds = `round ${view.roundsStarted} of ${goal.maxGoalRounds}`;
  const reason = goal.phase === "blocked" ? goal.blockedReason?.message || "" : "";
  return { phase: PHASES[goal.phase] || "Goal", objective: goal.objective, rounds, reason };
}

/** The goal chip. */
export class GoalChip {
  /** @param {HTMLElement} slot */
  constructor(slot) {
    this.slot = slot;
  }

  /** @param {{goal: {objective: string, phase: string, maxGoalRounds: number, blockedReason?: {message?: string}}, roundsStarted: number} | null | undefined} view */
  render(view) {
    if (!view?.goal) {
      replace(this.slot);
      this.slot.hidden = true;
      return;
    }
    const text = goalText(view);
    const full = [`${text.phase}: ${text.objective}`, text.rounds, text.reason].filter(Boolean).join(" · ");
    replace(
      this.slot,
      h(
        "span",
        { class: `chip goal-chip goal-${view.goal.phase}`, role: "group", "aria-label": full, title: full, dataset: { phase: view.goal.phase } },
        icon("target"),
        h("span", { class: "goal-phase", text: text.phase }),
        h("span", { class: "goal-objective", text: text.objective }),
        h("span", { class: "goal-rounds", text: text.rounds }),
      ),
    );
    this.slot.hidden = false;
  }
}
