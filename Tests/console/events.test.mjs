// Event application: the session's stream and the view's stream applied to the console's state,
// with what the render step must redraw and what the caller must fetch.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { applySessionEvent, applyViewEvent, expireHighlights } from "../../public/js/events.js";
import { FADE_MS, FLASH_MS, LOG_LIMIT, clearLog, initialState, toggleLogPause } from "../../public/js/state.js";

const json = (value) => JSON.stringify(value);
const add = (collection, id, fields) => json({ collection, id, fields });

/** A state with a session, following `tasks`. */
function following(collection = "tasks") {
  const state = initialState();
  state.session = { userId: null, connection: { state: "connected" } };
  state.selected = collection;
  state.viewStatus = "loading";
  return state;
}

describe("the session's stream", () => {
  test("every event is logged with its id; document events keep the counts", () => {
    const state = following();
    assert.deepEqual(applySessionEvent(state, "reset", "", json({ reason: "A snapshot follows" })), { parts: ["log"], effects: ["loadSubscriptions"] });
    applySessionEvent(state, "added", "", add("tasks", "a", { n: 1 }));
    assert.deepEqual(state.all.counts(), [], "not before the snapshot marker");
    assert.deepEqual(applySessionEvent(state, "snapshot", "7", json({ count: 1 })).parts, ["log", "collections"]);
    assert.deepEqual(state.all.counts(), [{ name: "tasks", count: 1 }]);
    assert.deepEqual(applySessionEvent(state, "added", "8", add("tasks", "b", {})), { parts: ["log", "collections"], effects: [] });
    assert.deepEqual(state.all.counts(), [{ name: "tasks", count: 2 }]);
    assert.deepEqual(state.log.entries.map((e) => [e.name, e.id]), [["reset", ""], ["added", ""], ["snapshot", "7"], ["added", "8"]]);
  });

  test("the first collection is selected when there is none, and its view opened", () => {
    const state = initialState();
    state.session = { connection: { state: "connected" } };
    applySessionEvent(state, "reset", "", "{}");
    applySessionEvent(state, "added", "", add("users", "u", {}));
    assert.equal(state.selected, null);
    const out = applySessionEvent(state, "snapshot", "1", json({ count: 1 }));
    assert.equal(state.selected, "users");
    assert.equal(state.viewStatus, "loading");
    assert.deepEqual(out.effects, ["openView"]);
    assert.deepEqual(applySessionEvent(state, "added", "2", add("tasks", "t", {})).effects, [], "only once");
  });

  test("connection and user update the session; a new user's name is looked up", () => {
    const state = following();
    applySessionEvent(state, "connection", "3", json({ state: "reconnecting", attempt: 2, retryIn: 1500 }));
    assert.deepEqual(state.session.connection, { state: "reconnecting", attempt: 2, retryIn: 1500 });
    state.session.username = "old";
    assert.deepEqual(applySessionEvent(state, "user", "4", json({ userId: "u1" })), { parts: ["log", "session"], effects: ["loadUsername"] });
    assert.equal(state.session.userId, "u1");
    assert.equal(state.session.username, null);
  });

  test("ready marks subscriptions ready; nosub with an error keeps the reason", () => {
    const state = following();
    state.subscriptions.set("s1", { id: "s1", name: "tasks", params: [], state: "pending", reason: null });
    assert.deepEqual(applySessionEvent(state, "ready", "5", json({ subscriptions: ["s1"] })).effects, ["loadSubscriptions"]);
    assert.equal(state.subscriptions.get("s1").state, "ready");
    applySessionEvent(state, "nosub", "6", json({ subscription: "s2", error: { error: "not-authorized", reason: "no" } }));
    assert.deepEqual(state.subscriptions.get("s2"), { id: "s2", name: "?", params: [], state: "error", reason: "not-authorized: no" });
    assert.deepEqual(applySessionEvent(state, "nosub", "7", json({ subscription: "s1" })).effects, ["loadSubscriptions"]);
  });

  test("the bridge's last event: shown; session-ended ends the page's session", () => {
    const state = following();
    const out = applySessionEvent(state, "error", "", json({ error: "session-ended", reason: "The session ended" }));
    assert.deepEqual(out.effects, ["sessionEnded"]);
    assert.deepEqual(state.sessionMessage, { text: "stream: session-ended: The session ended", kind: "error" });
    const lost = applySessionEvent(following(), "error", "", json({ error: "login-lost", reason: "The login was lost" }));
    assert.deepEqual(lost.effects, ["sessionEnded"], "a lost login ends the page's session too");
  });

  test("an event whose data is not JSON is logged and otherwise ignored", () => {
    const state = following();
    assert.deepEqual(applySessionEvent(state, "changed", "9", "{oops"), { parts: ["log"], effects: [] });
    assert.equal(state.log.entries.length, 1);
  });
});

describe("the view's stream", () => {
  test("the snapshot fills the table at once; then changes, arrivals and departures are highlighted", () => {
    const state = following();
    assert.deepEqual(applyViewEvent(state, "reset", "{}", 0).parts, [], "nothing to draw until the snapshot is whole");
    applyViewEvent(state, "added", add("tasks", "a", { n: 1, text: "x" }), 0);
    assert.deepEqual(applyViewEvent(state, "snapshot", json({ count: 1 }), 0).parts, ["view"]);
    assert.equal(state.viewStatus, "live");
    assert.equal(state.arrivals.size, 0, "snapshot rows are not new");

    applyViewEvent(state, "changed", json({ collection: "tasks", id: "a", fields: { n: 2, text: "x" }, cleared: [] }), 1000);
    assert.deepEqual([...state.flashes], [['"a" n', 1000 + FLASH_MS]], "only the field whose value changed");
    applyViewEvent(state, "added", add("tasks", "b", {}), 1000);
    assert.deepEqual([...state.arrivals], [['"b"', 1000 + FLASH_MS]]);
    applyViewEvent(state, "removed", json({ collection: "tasks", id: "b", previous: {} }), 1200);
    assert.deepEqual([...state.departures], [['"b"', 1200 + FADE_MS]]);
    assert.equal(state.arrivals.size, 0);
    assert.deepEqual([...state.view.documents("tasks").keys()], ['"a"']);

    expireHighlights(state, 1200 + FADE_MS);
    assert.equal(state.departures.size, 0);
    assert.equal(state.flashes.size, 1);
    expireHighlights(state, 1000 + FLASH_MS);
    assert.equal(state.flashes.size, 0);
  });

  test("a reset while live keeps the table until the new snapshot replaces it", () => {
    const state = following();
    for (const [name, data] of [["reset", "{}"], ["added", add("tasks", "a", {})], ["snapshot", "{}"]]) applyViewEvent(state, name, data, 0);
    applyViewEvent(state, "reset", "{}", 0);
    assert.equal(state.viewStatus, "live");
    assert.equal(state.view.documents("tasks").size, 1);
    applyViewEvent(state, "added", add("tasks", "b", {}), 0);
    applyViewEvent(state, "snapshot", "{}", 0);
    assert.deepEqual([...state.view.documents("tasks").keys()], ['"b"']);
  });

  test("events of another collection (a view left behind) change nothing", () => {
    const state = following("tasks");
    assert.deepEqual(applyViewEvent(state, "added", add("users", "u", {}), 0).parts, []);
    assert.equal(state.view.documents("users").size, 0);
  });

  test("200 quick changes are applied one by one, nothing reloaded", () => {
    const state = following();
    applyViewEvent(state, "reset", "{}", 0);
    applyViewEvent(state, "snapshot", "{}", 0);
    const effects = [];
    for (let i = 0; i < 200; i++) effects.push(...applyViewEvent(state, "added", add("tasks", `d${i}`, { n: i }), i).effects);
    for (let i = 0; i < 200; i += 2) {
      effects.push(...applyViewEvent(state, "changed", json({ collection: "tasks", id: `d${i}`, fields: { n: -i }, cleared: [] }), 300).effects);
    }
    for (let i = 1; i < 200; i += 4) effects.push(...applyViewEvent(state, "removed", json({ collection: "tasks", id: `d${i}` }), 400).effects);
    assert.deepEqual(effects, []);
    const documents = state.view.documents("tasks");
    assert.equal(documents.size, 150);
    assert.equal(documents.get('"d10"').doc.n, -10);
    assert.equal(documents.get('"d3"').doc.n, 3);
    assert.equal(documents.has('"d5"'), false);
  });
});

describe("the log", () => {
  test("keeps the newest, holds while paused and shows what it held on resume", () => {
    const state = initialState();
    for (let i = 0; i < LOG_LIMIT + 5; i++) applySessionEvent(state, "changed", String(i), "{}");
    assert.equal(state.log.entries.length, LOG_LIMIT);
    assert.equal(state.log.entries[0].id, "5");
    toggleLogPause(state.log);
    applySessionEvent(state, "added", "x", "{}");
    assert.equal(state.log.held.length, 1);
    assert.equal(state.log.entries.at(-1).id, String(LOG_LIMIT + 4));
    toggleLogPause(state.log);
    assert.equal(state.log.held.length, 0);
    assert.equal(state.log.entries.at(-1).id, "x");
    clearLog(state.log);
    assert.deepEqual(state.log.entries, []);
    assert.equal(state.log.generation, 1);
  });
});
