// @ts-check
// What the console does: the REST calls behind its controls, and the effects its event streams
// ask for (js/streams.js). The panels call these actions; the results go into the store, and
// the render step shows them.

import { ApiError, request, wireId } from "../api.js";
import { describeError, methodErrorText } from "./format.js";
import { clearSession, clearView } from "./state.js";
import { createStreams } from "./streams.js";

/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Store<State>} Store */
/** @typedef {import("./events.js").Effect} Effect */
/** @typedef {import("./query.js").ViewQuery} ViewQuery */

/**
 * @param {Store} store
 */
export function createApp(store) {
  const state = store.state;
  const streams = createStreams(store, { run, loadSession });

  // ------------------------------------------------------------ session

  async function loadSession() {
    try {
      const session = await request("GET", "/v1/session");
      const known = state.session && state.session.userId === session.userId ? state.session.username : null;
      state.session = { ...session, username: known };
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        if (state.session) endSessionState();
      } else {
        store.update("session", (s) => { s.sessionMessage = { text: describeError(error), kind: "error" }; });
        return;
      }
    }
    if (state.session && !state.session.username) await loadUsername();
    store.update("session");
  }

  async function loadUsername() {
    const session = state.session;
    const userId = session && session.userId;
    if (!session || !userId) return;
    try {
      const user = await request("GET", `/v1/collections/users/${encodeURIComponent(wireId(userId))}`);
      session.username = user.username || (user.emails && user.emails[0] && user.emails[0].address) || null;
    } catch {
      // The user's document may not be published; the id will do.
    }
    store.update("session");
  }

  /** The session ended or is gone: close its streams and forget what it showed. */
  function endSessionState() {
    streams.closeAll();
    store.update(["session", "subscriptions", "collections", "view", "editor"], clearSession);
  }

  /** After a session starts or its user changes: follow it again from scratch. */
  async function reloadAll() {
    await loadSession();
    if (state.session) {
      streams.openSession();
      if (state.selected && !streams.viewOpen()) streams.openView();
      await loadSubscriptions();
    } else {
      endSessionState();
    }
  }

  /**
   * Runs a session action, then reads the session again.
   * @param {() => Promise<unknown>} action
   * @param {string} success
   */
  async function sessionAction(action, success) {
    store.update("session", (s) => { s.sessionMessage = { text: "…" }; });
    try {
      await action();
      store.update("session", (s) => { s.sessionMessage = { text: success, kind: "ok" }; });
    } catch (error) {
      store.update("session", (s) => { s.sessionMessage = { text: describeError(error), kind: "error" }; });
    }
    await reloadAll();
  }

  /** @param {Record<string, string>} body */
  function logIn(body) {
    return request("POST", state.session ? "/v1/session/login" : "/v1/sessions", body);
  }

  // ------------------------------------------------------------ subscriptions

  async function loadSubscriptions() {
    try {
      /** @type {import("./state.js").Subscription[]} */
      const listed = await request("GET", "/v1/subscriptions");
      const failed = [...state.subscriptions.values()].filter((s) => s.state === "error");
      state.subscriptions = new Map(listed.map((s) => [s.id, { ...s, reason: null }]));
      for (const sub of failed) state.subscriptions.set(sub.id, sub);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 401)) {
        state.sessionMessage = { text: describeError(error), kind: "error" };
      }
    }
    store.update(["subscriptions", "session"]);
  }

  /**
   * @param {string} name
   * @param {unknown[]} params
   */
  async function subscribe(name, params) {
    try {
      const sub = await request("POST", "/v1/subscriptions", { name, params, wait: false });
      const known = state.subscriptions.get(sub.id);
      if (known && known.state === "error") {
        // Its `nosub` arrived before this answer: keep the error, name the subscription.
        known.name = sub.name;
        known.params = sub.params;
      } else if (!known) {
        state.subscriptions.set(sub.id, { ...sub, reason: null });
      }
      store.update("subscriptions");
      await loadSubscriptions();
    } catch (error) {
      const failed = `failed-${Date.now()}`;
      store.update("subscriptions", (s) => {
        s.subscriptions.set(failed, { id: failed, name, params, state: "error", reason: describeError(error) });
      });
    }
  }

  /** @param {string} id */
  async function unsubscribe(id) {
    const sub = state.subscriptions.get(id);
    if (!sub) return;
    if (sub.state === "error") {
      store.update("subscriptions", (s) => { s.subscriptions.delete(id); });
      return;
    }
    try {
      await request("DELETE", `/v1/subscriptions/${encodeURIComponent(id)}`);
    } catch (error) {
      store.update("session", (s) => { s.sessionMessage = { text: describeError(error), kind: "error" }; });
    }
    await loadSubscriptions();
  }

  /** @param {Effect[]} effects */
  function run(effects) {
    for (const effect of new Set(effects)) {
      switch (effect) {
        case "loadSubscriptions": loadSubscriptions(); break;
        case "loadUsername": loadUsername(); break;
        case "loadSession": loadSession(); break;
        case "sessionEnded": endSessionState(); reloadAll(); break;
        case "openView": streams.openView(); break;
        default: break;
      }
    }
  }

  // ------------------------------------------------------------ the table's view

  /** @param {string} name */
  function selectCollection(name) {
    store.update(["collections", "view", "editor"], (s) => {
      s.selected = name;
      s.page = 0;
      s.editing = null;
      s.queryMessage = { text: "" };
      clearView(s);
    });
    streams.openView();
  }

  /**
   * Applies a query from the form: a new selector opens a new live query; a sort or a page size
   * is applied to the documents the page holds.
   * @param {ViewQuery} next
   */
  function applyQuery(next) {
    const reopen = next.selector !== state.query.selector || (state.viewStatus === "failed" && state.selected !== null);
    store.update("view", (s) => {
      s.query = next;
      s.page = 0;
      s.queryMessage = { text: "" };
      if (reopen) clearView(s);
    });
    if (reopen) streams.openView();
  }

  /** @param {number} page */
  function showPage(page) {
    store.update("view", (s) => { s.page = Math.max(0, page); });
  }

  // ------------------------------------------------------------ writes

  /** @param {string} key a row's key */
  function startEdit(key) {
    const entry = state.view.documents(state.selected || "").get(key);
    if (!entry) return;
    store.update("editor", (s) => {
      s.editing = { id: entry.id, doc: entry.doc };
      s.editorMessage = { text: "" };
    });
  }

  function cancelEdit() {
    store.update("editor", (s) => { s.editing = null; });
  }

  /** @param {Record<string, unknown>} value */
  async function saveDocument(value) {
    if (!state.selected) {
      store.update("editor", (s) => { s.editorMessage = { text: "Select a collection first", kind: "error" }; });
      return;
    }
    const base = `/v1/collections/${encodeURIComponent(state.selected)}`;
    try {
      if (state.editing === null) {
        const answer = await request("POST", base, value);
        const id = answer && (answer.id !== undefined ? answer.id : answer._id);
        store.update("editor", (s) => { s.editorMessage = { text: `Inserted ${id !== undefined ? JSON.stringify(id) : ""}`, kind: "ok" }; });
      } else {
        await request("PATCH", `${base}/${encodeURIComponent(wireId(state.editing.id))}`, value);
        store.update("editor", (s) => {
          s.editorMessage = { text: "Saved", kind: "ok" };
          s.editing = null;
        });
      }
    } catch (error) {
      store.update("editor", (s) => { s.editorMessage = { text: describeError(error), kind: "error" }; });
    }
  }

  /** @param {string} key a row's key */
  async function removeDocument(key) {
    const entry = state.view.documents(state.selected || "").get(key);
    if (!entry || !state.selected) return;
    try {
      await request("DELETE", `/v1/collections/${encodeURIComponent(state.selected)}/${encodeURIComponent(entry.wire)}`);
    } catch (error) {
      store.update("editor", (s) => { s.editorMessage = { text: describeError(error), kind: "error" }; });
    }
  }

  // ------------------------------------------------------------ methods

  /**
   * @param {string} name
   * @param {unknown[]} params
   */
  async function callMethod(name, params) {
    store.update("methods", (s) => { s.methodOutput = { text: `calling ${name}…`, error: false }; });
    try {
      const answer = await request("POST", `/v1/methods/${encodeURIComponent(name)}`, params);
      store.update("methods", (s) => { s.methodOutput = { text: `result:\n${JSON.stringify(answer.result, null, 2)}`, error: false }; });
    } catch (error) {
      store.update("methods", (s) => { s.methodOutput = { text: methodErrorText(error), error: true }; });
    }
  }

  return {
    store,
    reloadAll,
    sessionAction,
    logIn,
    closeStreams: streams.closeAll,
    subscribe,
    unsubscribe,
    selectCollection,
    applyQuery,
    showPage,
    startEdit,
    cancelEdit,
    saveDocument,
    removeDocument,
    callMethod,
  };
}

/** @typedef {ReturnType<typeof createApp>} App */
