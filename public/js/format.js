// @ts-check
// Text the console shows, from values and answers.

import { ApiError } from "../api.js";
import { kindOf } from "./ejson.js";

/** @typedef {import("./state.js").Session} Session */
/** @typedef {import("./state.js").Subscription} Subscription */

/** Longest raw event text the log shows before cutting it. */
export const LOG_TEXT_LIMIT = 400;

/**
 * A field's value in a table cell: dates as ISO 8601, everything else as JSON.
 * @param {unknown} value
 * @returns {string}
 */
export function formatValue(value) {
  if (kindOf(value) === "date") {
    const date = new Date(/** @type {{$date: number}} */ (value).$date);
    if (!Number.isNaN(date.getTime())) return date.toISOString();
  }
  return JSON.stringify(value) ?? "undefined";
}

/**
 * A document id as people read it: a string as is, anything else as JSON.
 * @param {unknown} id
 */
export function displayId(id) {
  return typeof id === "string" ? id : JSON.stringify(id);
}

/**
 * An error in one line: the bridge's status, error and reason, or the message. A Meteor error
 * whose code is the status (403 "Incorrect password") shows it once.
 * @param {unknown} error
 * @returns {string}
 */
export function describeError(error) {
  if (error instanceof ApiError) {
    const status = error.status > 0 ? String(error.status) : "";
    const code = String(error.body.error);
    const label = code === status || code === "" ? status : status ? `${status} ${code}` : code;
    return label ? `${label}: ${error.body.reason}` : error.body.reason;
  }
  if (error instanceof Error) return error.message;
  return String(error);
}

/**
 * A method call's error, as the methods panel shows it.
 * @param {unknown} error
 */
export function methodErrorText(error) {
  const status = error instanceof ApiError ? error.status : 0;
  const body = error instanceof ApiError ? error.body : { error: "client", reason: describeError(error), details: null };
  const details = body.details !== undefined && body.details !== null ? `details: ${JSON.stringify(body.details, null, 2)}` : "";
  return `status: ${status || "-"}\nerror: ${JSON.stringify(body.error)}\nreason: ${body.reason}\n${details}`;
}

/**
 * A subscription as `name(param, …)`.
 * @param {Subscription} sub
 */
export function subscriptionLabel(sub) {
  return `${sub.name}(${sub.params.map((p) => JSON.stringify(p)).join(", ")})`;
}

/**
 * The connection pill: its state attribute and text (a countdown while reconnecting).
 * @param {Session | null} session
 * @param {number} now milliseconds
 * @param {number} since when the reconnecting state was shown first
 * @returns {{state: string, text: string}}
 */
export function connectionLabel(session, now, since = now) {
  if (!session) return { state: "none", text: "no session" };
  const connection = session.connection || { state: "connecting" };
  if (connection.state === "reconnecting") {
    const left = Math.max(0, Math.ceil((since + (connection.retryIn || 0) - now) / 1000));
    return { state: "reconnecting", text: `reconnecting in ${left} s (attempt ${connection.attempt})` };
  }
  if (connection.state === "stream-reconnecting") return { state: "connecting", text: "stream reconnecting…" };
  return { state: connection.state, text: connection.state };
}

/**
 * Who is logged in.
 * @param {Session | null} session
 */
export function userLabel(session) {
  if (!session) return "not logged in";
  if (!session.userId) return "anonymous";
  return `user ${session.username || session.userId}`;
}

/**
 * The table's caption.
 * @param {string | null} selected
 * @param {number} count
 * @param {string} status the view's status
 */
export function captionText(selected, count, status) {
  if (!selected) return "Select a collection";
  if (status === "loading") return `${selected}: loading…`;
  return `${selected}: ${count} matching document${count === 1 ? "" : "s"}`;
}

/**
 * A raw event as the log shows it, cut when long.
 * @param {string} text
 */
export function logText(text) {
  return text.length > LOG_TEXT_LIMIT ? `${text.slice(0, LOG_TEXT_LIMIT)}…` : text;
}
