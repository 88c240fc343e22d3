// @ts-check
// Applies the bridge's events to the console's state. Two streams feed it:
// - the session's stream (`/v1/events?snapshot=true`): every event goes to the log; document
//   events keep the collections' counts; connection, user, ready, nosub and error update the
//   session and subscriptions;
// - the view's stream (`/v1/events?collections=NAME&selector=…&snapshot=true`, a live query):
//   its document events keep the table's documents, so the table never reloads by REST.
// Pure: what needs the network comes back as effects for the caller to run.

import { FADE_MS, FLASH_MS, clearView, logEvent } from "./state.js";

/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Part} Part */

/**
 * Work for the caller: reload the subscriptions, look the user's name up, read the session again,
 * forget a session that ended, open the view's stream (a collection was selected).
 * @typedef {"loadSubscriptions" | "loadUsername" | "loadSession" | "sessionEnded" | "openView"} Effect
 */

/** @typedef {{parts: Part[], effects: Effect[]}} Outcome */

/** @param {string} text @returns {any} */
function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * Applies one event of the session's stream.
 * @param {State} state
 * @param {string} name the event's name
 * @param {string} id its id (`lastEventId`; empty inside a snapshot)
 * @param {string} text its data
 * @returns {Outcome}
 */
export function applySessionEvent(state, name, id, text) {
  logEvent(state.log, name, id, text);
  /** @type {Outcome} */
  const out = { parts: ["log"], effects: [] };
  const data = parse(text);
  switch (name) {
    case "added":
    case "changed":
    case "removed":
    case "reset":
    case "snapshot": {
      const applied = state.all.apply(name, data);
      if (applied && applied.type !== "reset") out.parts.push("collections");
      if (name === "reset") out.effects.push("loadSubscriptions");
      if (!state.selected && state.all.pending === null) {
        const first = state.all.counts()[0];
        if (first) {
          state.selected = first.name;
          state.page = 0;
          clearView(state);
          out.parts.push("view");
          out.effects.push("openView");
        }
      }
      break;
    }
    case "connection":
      if (state.session && data) {
        state.session.connection = data;
        out.parts.push("session");
      }
      break;
    case "user":
      if (state.session && data) {
        state.session.userId = data.userId;
        state.session.username = null;
        out.parts.push("session");
        out.effects.push("loadUsername");
      }
      break;
    case "ready":
      for (const subId of (data && data.subscriptions) || []) {
        const sub = state.subscriptions.get(subId);
        if (sub) sub.state = "ready";
      }
      out.parts.push("subscriptions");
      out.effects.push("loadSubscriptions");
      break;
    case "nosub":
      if (data && data.error) {
        const sub = state.subscriptions.get(data.subscription) || { id: data.subscription, name: "?", params: [], state: "error", reason: null };
        sub.state = "error";
        sub.reason = `${data.error.error}: ${data.error.reason || data.error.message || ""}`;
        state.subscriptions.set(sub.id, sub);
        out.parts.push("subscriptions");
      } else {
        out.effects.push("loadSubscriptions");
      }
      break;
    case "error":
      if (data) {
        state.sessionMessage = { text: `stream: ${data.error}: ${data.reason}`, kind: "error" };
        out.parts.push("session");
        // The session is over: ended, or its login lost (the bridge ends it).
        if (data.error === "session-ended" || data.error === "login-lost") out.effects.push("sessionEnded");
      }
      break;
    default:
      break;
  }
  return out;
}

/**
 * Applies one event of the view's stream to the table's documents, noting what to highlight:
 * the fields a change touched, a row that arrived, a row that left (it fades out).
 * @param {State} state
 * @param {string} name
 * @param {string} text
 * @param {number} now milliseconds, for the highlights
 * @returns {Outcome}
 */
export function applyViewEvent(state, name, text, now) {
  /** @type {Outcome} */
  const out = { parts: [], effects: [] };
  const data = parse(text);
  if (name !== "reset" && name !== "snapshot" && data && data.collection !== state.selected) return out;
  const applied = state.view.apply(name, data);
  if (!applied) return out;
  out.parts.push("view");
  switch (applied.type) {
    case "reset":
      if (state.viewStatus !== "live") state.viewStatus = "loading";
      out.parts.length = 0; // the table keeps what it shows until the snapshot is complete
      break;
    case "snapshot":
      state.viewStatus = "live";
      state.flashes.clear();
      state.arrivals.clear();
      state.departures.clear();
      break;
    case "added":
      state.departures.delete(applied.key);
      state.arrivals.set(applied.key, now + FLASH_MS);
      break;
    case "changed":
      for (const field of applied.fields) state.flashes.set(`${applied.key} ${field}`, now + FLASH_MS);
      break;
    case "removed":
      state.departures.set(applied.key, now + FADE_MS);
      state.arrivals.delete(applied.key);
      break;
    default:
      break;
  }
  return out;
}

/**
 * Forgets highlights that are over.
 * @param {State} state
 * @param {number} now
 */
export function expireHighlights(state, now) {
  for (const map of [state.flashes, state.arrivals, state.departures]) {
    for (const [key, until] of map) if (until <= now) map.delete(key);
  }
}
