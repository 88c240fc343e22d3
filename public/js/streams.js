// @ts-check
// The console's two event streams, applied to the store as their events arrive:
// - the session's (`/v1/events?snapshot=true`): the log, the collections' counts, the session's
//   connection and user, its subscriptions;
// - the view's (`/v1/events?collections=NAME&selector=…&snapshot=true`): a live query over the
//   selected collection; the bridge runs the selector, the page sorts and pages what it holds.
// Neither reloads anything by REST: a `reset` is followed by a snapshot on the same stream.

import { ApiError, query, request } from "../api.js";
import { openEventStream } from "./event-stream.js";
import { applySessionEvent, applyViewEvent } from "./events.js";
import { describeError } from "./format.js";

/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Store<State>} Store */
/** @typedef {import("./events.js").Effect} Effect */

/** How long to wait before opening a refused view stream again (ms): first, and at most. */
const RETRY_FIRST = 1000;
const RETRY_MAX = 10000;

/**
 * @param {Store} store
 * @param {{run: (effects: Effect[]) => void, loadSession: () => Promise<void>}} hooks what the streams ask the app to do
 */
export function createStreams(store, hooks) {
  const state = store.state;
  /** @type {{close: () => void} | null} */
  let sessionStream = null;
  /** @type {{close: () => void} | null} */
  let viewStream = null;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let viewRetry;
  let retryDelay = RETRY_FIRST;

  /** Follows the session's events (once; a stream already open is kept). */
  function openSession() {
    if (sessionStream) return;
    const stream = openEventStream("/v1/events?snapshot=true", {
      onEvent(name, id, text) {
        const out = applySessionEvent(state, name, id, text);
        store.update(out.parts);
        hooks.run(out.effects);
      },
      onOpen() {
        if (state.session) hooks.loadSession();
      },
      onReconnecting() {
        store.update("session", (s) => { if (s.session) s.session.connection = { state: "stream-reconnecting" }; });
      },
      onClosed() {
        // The bridge refused the stream (no session any more): show that.
        if (sessionStream === stream) sessionStream = null;
        hooks.loadSession();
      },
    });
    sessionStream = stream;
  }

  /** Follows the table's view (closing the one before): a live query, with a snapshot first. */
  function openView() {
    closeView();
    if (!state.session || !state.selected) return;
    const collection = state.selected;
    const selector = state.query.selector;
    const url = `/v1/events${query({ collections: collection, selector, snapshot: "true" })}`;
    const stream = openEventStream(url, {
      onEvent(name, _id, text) {
        const out = applyViewEvent(state, name, text, Date.now());
        if (out.parts.length) store.update(out.parts);
      },
      onOpen() {
        retryDelay = RETRY_FIRST;
      },
      onClosed() {
        if (viewStream !== stream) return;
        viewStream = null;
        explainRefusedView(collection, selector);
      },
    });
    viewStream = stream;
  }

  /**
   * The bridge refused the view's stream; EventSource cannot read why, so the same selector is
   * tried as a query (one request). A bad selector is shown; anything else (such as too many
   * streams open in the session) is tried again, a little later each time.
   * @param {string} collection
   * @param {string} selector
   */
  async function explainRefusedView(collection, selector) {
    const current = () => state.selected === collection && state.query.selector === selector && !viewStream;
    try {
      await request("GET", `/v1/collections/${encodeURIComponent(collection)}${query({ selector, limit: 0 })}`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        hooks.loadSession();
        return;
      }
      if (!current()) return;
      if (error instanceof ApiError && error.status >= 400 && error.status < 500 && error.status !== 429) {
        store.update("view", (s) => {
          s.viewStatus = "failed";
          s.queryMessage = { text: describeError(error), kind: "error" };
        });
        return;
      }
    }
    if (!current()) return;
    const delay = retryDelay;
    retryDelay = Math.min(RETRY_MAX, retryDelay * 2);
    store.update("view", (s) => {
      s.queryMessage = { text: `The bridge refused the table's stream; trying again in ${Math.round(delay / 1000)} s`, kind: "error" };
    });
    viewRetry = setTimeout(() => {
      if (!current()) return;
      store.update("view", (s) => { s.queryMessage = { text: "" }; });
      openView();
    }, delay);
  }

  function closeView() {
    clearTimeout(viewRetry);
    if (viewStream) viewStream.close();
    viewStream = null;
  }

  function closeAll() {
    closeView();
    if (sessionStream) sessionStream.close();
    sessionStream = null;
  }

  return { openSession, openView, viewOpen: () => viewStream !== null, closeAll };
}
