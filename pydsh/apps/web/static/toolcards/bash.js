// `bash`: description; expanded, cwd chip, command, output with its [stderr] part and markers, Copy.

import { basename, h } from "../dom.js";
import { copy, cwd, output, resultText } from "./common.js";

export const title = "Bash";

export function summary(args) {
  return args.description || args.command || "";
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
