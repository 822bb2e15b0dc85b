// What the composer's completion offers (spec 12 F29 and the session reference): the "/" commands, other
// sessions by title and the workspace's files; and the commands the page runs itself. "/compact" (and any
// other command the server names in /api/info) is sent as the prompt, which the profile's command plugin
// runs instead of the model; "/model", "/permission" and "/export" act in the page.

import { api } from "./api.js";
import { app } from "./store.js";

const SESSIONS_SHOWN = 6;

/**
 * The commands available now.
 * @param {boolean} hasSession
 * @param {string[]} presets
 * @returns {Array<{name: string, description: string, args?: () => string[]}>}
 */
export function commandList(hasSession, presets) {
  const out = (app.info?.commands || []).map((c) => ({ name: c.name, description: c.description }));
  out.push({ name: "model", description: "Switch the model of this session", args: modelIds });
  out.push({ name: "permission", description: "Set the permission preset", args: () => presets });
  if (hasSession) out.push({ name: "export", description: "Download the session log" });
  return out;
}

/** Every model id of the configured providers. */
function modelIds() {
  return (app.models.providers || []).filter((p) => p.configured).flatMap((p) => (p.models || []).map((m) => m.id));
}

/**
 * A command the page runs itself, typed as the whole prompt ("/model deepseek-v4-pro"); null for anything else.
 * @param {string} text
 * @returns {{name: "model" | "permission" | "export", arg: string} | null}
 */
export function pageCommand(text) {
  const m = text.trim().match(/^\/(model|permission|export)(?:\s+(\S+))?$/);
  return m ? { name: /** @type {any} */ (m[1]), arg: m[2] || "" } : null;
}

/**
 * Other root sessions whose title contains `query`, newest first, leaving out `exclude` (the open one and
 * those already referenced).
 * @param {string} query
 * @param {Set<string>} exclude
 */
export function sessionsMatching(query, exclude) {
  const q = query.toLowerCase();
  return [...app.sessions.values()]
    .filter((s) => !s.parentSessionId && !exclude.has(s.sessionId) && (s.title || "New session").toLowerCase().includes(q))
    .sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0))
    .slice(0, SESSIONS_SHOWN);
}

/**
 * Other root sessions whose title contains `query`, searched by the server among all stored and live sessions
 * (the sidebar holds only its first pages), newest first, leaving out `exclude`.
 * @param {string} query
 * @param {Set<string>} exclude
 * @returns {Promise<Array<{sessionId: string, title: string, updatedAt?: number, parentSessionId?: string}>>}
 */
export async function sessionsFound(query, exclude) {
  const page = await api.sessions({ q: query, limit: SESSIONS_SHOWN + exclude.size });
  return (page.sessions || []).filter((s) => !exclude.has(s.sessionId)).slice(0, SESSIONS_SHOWN);
}

/**
 * The sessions shown first (the sidebar's) with those the server found, once each, newest first.
 * @param {Array<{sessionId: string, updatedAt?: number}>} shown
 * @param {Array<{sessionId: string, updatedAt?: number}>} found
 */
export function mergedSessions(shown, found) {
  const byId = new Map([...found, ...shown].map((s) => [s.sessionId, s]));
  return [...byId.values()].sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0)).slice(0, SESSIONS_SHOWN);
}

/**
 * Workspace-relative paths of files whose path contains `query` (none without a workspace).
 * @param {string | undefined} workspaceId
 * @param {string} query
 * @returns {Promise<string[]>}
 */
export async function filesMatching(workspaceId, query) {
  if (!workspaceId) return [];
  return (await api.files(workspaceId, query)).files || [];
}
