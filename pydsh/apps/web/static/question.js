// The question card for ask_user_question (and exit_plan_mode's plan review, whose plan comes as the question's
// Markdown `detail`): numbered options (keys 1–9), Recommended tag, checkboxes for
// multi-select questions (`multiSelect` in the server's view), free text, pager, Skip / Submit, and × to minimise
// to a "Question waiting" chip.

import { api } from "./api.js";
import { announce, h, icon, replace } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const RECOMMENDED = /\s*\(Recommended\)\s*$/;

/** Renders the first waiting question request of the open session into `slot`. */
export class QuestionCard {
  /**
   * @param {HTMLElement} slot
   * @param {{sessionId: () => string | null, notify: (message: string) => void}} ctx
   */
  constructor(slot, ctx) {
    this.slot = slot;
    this.ctx = ctx;
    this.announced = new Set();
    this.state = null;
    this.minimised = false;
    document.addEventListener("keydown", (e) => this.digit(e));
  }

  render(questions) {
    const request = questions[0];
    if (!request) {
      this.state = null;
      replace(this.slot);
      this.slot.hidden = true;
      return;
    }
    if (!this.state || this.state.requestId !== request.requestId) {
      this.state = { requestId: request.requestId, questions: request.questions || [], page: 0, answers: (request.questions || []).map(() => ({ selected: new Set(), custom: "" })) };
      this.minimised = false;
      this.paint();
      this.focusFirst();
    } else this.paint();
    if (!this.announced.has(request.requestId)) {
      this.announced.add(request.requestId);
      announce(`Question: ${request.questions?.[0]?.question || "the agent asks a question"}`, true);
    }
  }

  paint() {
    const st = this.state;
    this.slot.hidden = false;
    if (this.minimised) {
      const chip = h("button", { type: "button", class: "chip-btn question-chip" }, icon("question"), "Question waiting");
      chip.addEventListener("click", () => {
        this.minimised = false;
        this.paint();
        this.slot.querySelector(".option input")?.focus();
      });
      replace(this.slot, chip);
      return;
    }
    const q = st.questions[st.page] || {};
    const answer = st.answers[st.page];
    const multi = Boolean(q.multiSelect);
    const name = `q-${st.requestId}-${st.page}`;
    const options = (q.options || []).map((opt, i) => {
      const recommended = RECOMMENDED.test(opt.label);
      const input = h("input", { type: multi ? "checkbox" : "radio", name, value: opt.label, checked: answer.selected.has(opt.label) });
      input.addEventListener("change", () => {
        if (!multi) answer.selected.clear();
        if (input.checked) answer.selected.add(opt.label);
        else answer.selected.delete(opt.label);
      });
      return h(
        "label",
        { class: "option" },
        input,
        h("span", { class: "option-key", "aria-hidden": "true", text: String(i + 1) }),
        h("span", { class: "option-text" }, h("span", { class: "option-label", text: opt.label.replace(RECOMMENDED, "") }), recommended ? h("span", { class: "tag", text: "Recommended" }) : null, opt.description ? h("span", { class: "option-desc", text: opt.description }) : null),
      );
    });
    const custom = h("input", { type: "text", class: "input", placeholder: "Type your answer", "aria-label": "Your own answer", value: answer.custom });
    custom.addEventListener("input", () => {
      answer.custom = custom.value;
    });
    const prev = h("button", { type: "button", class: "icon-btn", "aria-label": "Previous question", disabled: st.page === 0 }, icon("chevron-left"));
    prev.addEventListener("click", () => this.turn(-1));
    const next = h("button", { type: "button", class: "icon-btn", "aria-label": "Next question", disabled: st.page >= st.questions.length - 1 }, icon("chevron-right"));
    next.addEventListener("click", () => this.turn(1));
    const skip = h("button", { type: "button", class: "btn", text: "Skip" });
    skip.addEventListener("click", () => this.send({ skip: true }));
    const submit = h("button", { type: "button", class: "btn primary", text: "Submit" });
    submit.addEventListener("click", () => this.send(this.body()));
    const minimise = h("button", { type: "button", class: "icon-btn", "aria-label": "Minimise question" }, icon("close"));
    minimise.addEventListener("click", () => {
      this.minimised = true;
      this.paint();
      this.slot.querySelector(".question-chip")?.focus();
    });
    const titleId = `question-title-${st.requestId}`;
    const fieldset = h("fieldset", { class: "options" }, h("legend", { class: "sr-only", text: q.question || "Question" }), options);
    replace(
      this.slot,
      h(
        "section",
        { class: "card question-card", "aria-labelledby": titleId, dataset: { requestId: st.requestId } },
        h("header", { class: "card-head" }, h("div", null, q.header ? h("span", { class: "chip", text: q.header }) : null, h("h2", { id: titleId, class: "card-title question-text", text: q.question || "" })), minimise),
        h("div", { class: "card-body" }, detail(q), fieldset, h("div", { class: "custom-answer" }, icon("pencil"), custom)),
        h("div", { class: "card-actions" }, h("div", { class: "pager" }, prev, h("span", { text: `${st.page + 1} / ${st.questions.length}` }), next), h("span", { class: "grow" }), skip, submit),
      ),
    );
  }

  /** Focus the first option of a card that just appeared, so keys 1–9 answer it instead of typing into the composer. */
  focusFirst() {
    /** @type {HTMLElement | null} */ (this.slot.querySelector(".option input"))?.focus({ preventScroll: true });
  }

  turn(delta) {
    this.state.page = Math.max(0, Math.min(this.state.questions.length - 1, this.state.page + delta));
    this.paint();
  }

  body() {
    return {
      answers: this.state.questions.map((q, i) => {
        const a = this.state.answers[i];
        const entry = { id: q.id, selected: [...a.selected] };
        if (a.custom.trim()) entry.custom = a.custom;
        return entry;
      }),
    };
  }

  async send(body) {
    for (const b of this.slot.querySelectorAll("button")) b.disabled = true;
    try {
      await api.answer(this.ctx.sessionId(), this.state.requestId, body);
    } catch (err) {
      this.ctx.notify(err.status === 409 ? "This question was already answered." : err.message);
      for (const b of this.slot.querySelectorAll("button")) b.disabled = false;
    }
  }

  /** Keys 1–9 pick an option unless typing in a text field. */
  digit(e) {
    if (!this.state || this.minimised || this.slot.hidden || e.ctrlKey || e.metaKey || e.altKey) return;
    const target = /** @type {HTMLElement} */ (e.target);
    if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && !["radio", "checkbox"].includes(/** @type {HTMLInputElement} */ (target).type)))) return;
    if (!/^[1-9]$/.test(e.key)) return;
    const input = this.slot.querySelectorAll(".option input")[Number(e.key) - 1];
    if (!input) return;
    e.preventDefault();
    input.click();
    input.focus();
  }
}

/** A question's Markdown `detail` (a plan under review), scrollable and reachable by keyboard; none without one. */
function detail(q) {
  if (!q.detail) return null;
  const label = q.header ? `${q.header}: details` : "Details";
  return h("div", { class: "markdown question-detail", role: "region", tabindex: "0", "aria-label": label }, renderMarkdown(q.detail));
}
