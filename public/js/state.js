// @ts-check
// The console's state: everything the panels show, in one object kept by the store.

import { LocalCopy } from "./local-copy.js";
import { DEFAULT_LIMIT } from "./query.js";

/** @typedef {import("./query.js").ViewQuery} ViewQuery */
/** @typedef {{state: string, attempt?: number, retryIn?: number}} Connection */
/** @typedef {{userId?: string | null, username?: string | null, connection: Connection}} Session */
/** @typedef {{id: string, name: string, params: unknown[], state: string, reason: string | null}} Subscription */
/** @typedef {{text: string, kind?: "error" | "ok"}} Message */
/** @typedef {{seq: number, id: string, name: string, text: string}} LogEntry */

/**
 * @typedef {object} State
 * @property {Session | null} session `GET /v1/session`, or null without a session
 * @property {Message} sessionMessage
 * @property {Map<string, Subscription>} subscriptions by id
 * @property {LocalCopy} all every collection's document ids, from the session's stream (the counts)
 * @property {string | null} selected the collection in the table
 * @property {ViewQuery} query the applied selector, sort and page size
 * @property {number} page
 * @property {LocalCopy} view the selected collection's documents inside the selector, from the view's stream
 * @property {"idle" | "loading" | "live" | "failed"} viewStatus
 * @property {Message} queryMessage
 * @property {Map<string, number>} flashes `key field` → until when a changed field stays highlighted
 * @property {Map<string, number>} arrivals row key → until when a new row stays highlighted
 * @property {Map<string, number>} departures row key → until when a removed row has faded out
 * @property {{id: unknown, doc: Record<string, unknown>} | null} editing the document being edited (as it was then), or null for an insert
 * @property {Message} editorMessage
 * @property {{text: string, error: boolean}} methodOutput
 * @property {{entries: LogEntry[], held: LogEntry[], paused: boolean, seq: number, generation: number}} log
 */

/** How many raw events the log keeps (shown, and held while paused). */
export const LOG_LIMIT = 500;
/** How long a changed field or a new row stays highlighted, and a removed row takes to fade (ms). */
export const FLASH_MS = 1600;
export const FADE_MS = 650;

/** @returns {State} */
export function initialState() {
  return {
    session: null,
    sessionMessage: { text: "" },
    subscriptions: new Map(),
    all: new LocalCopy({ keepFields: false }),
    selected: null,
    query: { selector: "", sort: [], limit: DEFAULT_LIMIT },
    page: 0,
    view: new LocalCopy(),
    viewStatus: "idle",
    queryMessage: { text: "" },
    flashes: new Map(),
    arrivals: new Map(),
    departures: new Map(),
    editing: null,
    editorMessage: { text: "" },
    methodOutput: { text: "", error: false },
    log: { entries: [], held: [], paused: false, seq: 0, generation: 0 },
  };
}

/**
 * Starts a new view (another collection or selector): an empty copy the view's stream fills.
 * @param {State} state
 */
export function clearView(state) {
  state.view = new LocalCopy();
  state.viewStatus = state.selected ? "loading" : "idle";
  state.flashes.clear();
  state.arrivals.clear();
  state.departures.clear();
}

/**
 * Forgets everything a session showed (it ended, or there is none).
 * @param {State} state
 */
export function clearSession(state) {
  state.session = null;
  state.subscriptions.clear();
  state.all = new LocalCopy({ keepFields: false });
  state.selected = null;
  state.page = 0;
  state.editing = null;
  clearView(state);
}

/**
 * Adds a raw event to the log (held while the log is paused), keeping the newest LOG_LIMIT.
 * @param {State["log"]} log
 * @param {string} name
 * @param {string} id
 * @param {string} text
 */
export function logEvent(log, name, id, text) {
  log.seq += 1;
  const list = log.paused ? log.held : log.entries;
  list.push({ seq: log.seq, id, name, text });
  if (list.length > LOG_LIMIT) list.splice(0, list.length - LOG_LIMIT);
}

/**
 * Pauses the log, or resumes it with what was held.
 * @param {State["log"]} log
 */
export function toggleLogPause(log) {
  log.paused = !log.paused;
  if (!log.paused) {
    log.entries.push(...log.held);
    log.held = [];
    if (log.entries.length > LOG_LIMIT) log.entries.splice(0, log.entries.length - LOG_LIMIT);
  }
}

/**
 * Empties the log (and what it holds).
 * @param {State["log"]} log
 */
export function clearLog(log) {
  log.entries = [];
  log.held = [];
  log.generation += 1;
}
