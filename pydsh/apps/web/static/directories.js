// The directory browser of "Add workspace" (spec 12 F6): a dialog that lists the folders under a start
// folder (home by default), opens one by click or keyboard, goes up, and returns the folder chosen.
// Loaded with import() when asked for, so a failure leaves the typed path working.

import { api } from "./api.js";
import { h, icon, replace } from "./dom.js";

/**
 * Let the user pick a folder, starting at the home folder; resolves its absolute path, or null when the
 * dialog was closed.
 * @returns {Promise<string | null>}
 */
export function chooseDirectory() {
  return new Promise((resolve) => {
    const opener = /** @type {HTMLElement} */ (document.activeElement);
    let chosen = null;
    let current = null;
    const close = h("button", { type: "button", class: "icon-btn", "aria-label": "Close folder browser" }, icon("close"));
    const up = h("button", { type: "button", class: "btn small", "aria-label": "Up to the parent folder" }, icon("chevron-left"), "Up");
    const where = h("code", { class: "dir-path", id: "dir-path" });
    const roots = h("div", { class: "dir-roots", role: "group", "aria-label": "Start folders" });
    const list = h("ul", { class: "dir-list", "aria-labelledby": "dir-path" });
    const error = h("p", { class: "field-error", role: "alert", hidden: true });
    const cancel = h("button", { type: "button", class: "btn", text: "Cancel" });
    const pick = h("button", { type: "button", class: "btn primary", text: "Add this folder" });
    const dialog = h(
      "dialog",
      { class: "dialog dir-dialog", "aria-labelledby": "dir-title" },
      h("header", { class: "dialog-head" }, h("h2", { id: "dir-title", text: "Choose a workspace folder" }), close),
      h("div", { class: "dir-body" }, roots, h("div", { class: "dir-where" }, up, where), list, error),
      h("div", { class: "card-actions dir-actions" }, cancel, pick),
    );

    /** Show one folder's subfolders; on a refusal keep the current listing and say why. */
    const open = async (path, focusFirst = true) => {
      let listing;
      try {
        listing = await api.directories(path);
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
        return;
      }
      error.hidden = true;
      current = listing;
      where.textContent = listing.path;
      up.disabled = !listing.parent;
      replace(roots, listing.roots.map((root, i) => rootButton(root, i === 0 ? "Home" : null, open)));
      const entries = listing.directories.map((d) => entryButton(d, open));
      replace(list, entries.length ? entries.map((b) => h("li", null, b)) : h("li", { class: "muted", text: "No folders here." }));
      if (listing.truncated) list.append(h("li", { class: "muted", text: "Only the first 500 folders are shown." }));
      if (focusFirst) (entries[0] || pick).focus();
    };

    up.addEventListener("click", () => current?.parent && open(current.parent));
    list.addEventListener("keydown", (e) => moveFocus(e, list));
    close.addEventListener("click", () => dialog.close());
    cancel.addEventListener("click", () => dialog.close());
    pick.addEventListener("click", () => {
      chosen = current?.path || null;
      dialog.close();
    });
    dialog.addEventListener("close", () => {
      dialog.remove();
      opener?.focus();
      resolve(chosen);
    });
    document.body.append(dialog);
    dialog.showModal();
    open(undefined);
  });
}

/** A folder of the listing: opens it. */
function entryButton(dir, open) {
  const button = h("button", { type: "button", class: "dir-entry", dataset: { path: dir.path } }, icon("folder"), h("span", { text: dir.name }));
  button.addEventListener("click", () => open(dir.path));
  return button;
}

/** A browsing root (the home folder comes first, then the workspaces): opens it. */
function rootButton(root, label, open) {
  const name = label || root.split("/").filter(Boolean).pop() || root;
  const button = h("button", { type: "button", class: "chip-btn", title: root, text: name });
  button.addEventListener("click", () => open(root));
  return button;
}

/** ↑/↓ move between the folders of the list. */
function moveFocus(e, list) {
  if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
  const buttons = [...list.querySelectorAll("button")];
  const i = buttons.indexOf(/** @type {HTMLElement} */ (document.activeElement));
  if (i < 0) return;
  e.preventDefault();
  const next = buttons[Math.min(buttons.length - 1, Math.max(0, i + (e.key === "ArrowDown" ? 1 : -1)))];
  /** @type {HTMLElement} */ (next).focus();
}
