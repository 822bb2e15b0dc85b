// `bash`: description and a failure state for a non-zero exit; expanded, cwd chip, the command exactly as it ran,
// output with its [stderr] part and markers, Copy.

import { basename, h } from "../dom.js";
import { copy, cwd, output, resultText } from "./common.js";

export const title = "Bash";

export function summary(args) {
  return args.description || args.command || "";
}

/**
 * How a finished run failed, from the marker the tool puts on its last line (`[exit code: 3]` → "exit 3",
 * `[killed by signal: SIGKILL]` → "killed: SIGKILL"); null when it exited 0 (the tool then writes no marker).
 * @param {any} result
 */
export function failure(result) {
  const last = resultText(result).replace(/\n+$/, "").split("\n").pop() || "";
  const exit = last.match(/^\[exit code: (-?\d+)\]$/);
  if (exit) return `exit ${exit[1]}`;
  const killed = last.match(/^\[killed by signal: (\S+)\]$/);
  return killed ? `killed: ${killed[1]}` : null;
}

export function body(args, result) {
  const text = resultText(result);
  const head = h(
    "div",
    { class: "bash-head" },
    h("span", { class: "chip cwd", title: args.workdir || cwd(), text: basename(args.workdir || cwd()) || "cwd" }),
    h("code", { class: "bash-cmd", text: args.command || "" }),
    copy(`${args.command || ""}\n${text}`, "Copy command and output"),
  );
  const markers = [];
  if (args.run_in_background) markers.push("background job");
  if (args.sandbox_permissions) markers.push(`sandbox: ${args.sandbox_permissions}`);
  return h(
    "div",
    { class: "bash" },
    head,
    markers.length ? h("div", { class: "bash-markers" }, markers.map((m) => h("span", { class: "chip warn", text: m }))) : null,
    result ? output(text, { label: "Command output" }) : null,
  );
}
