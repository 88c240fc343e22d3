// The store: changes name the parts they touch; the render step runs once for all of them.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createStore } from "../../public/js/store.js";

/** A store whose render runs when the test says. */
function manual(state) {
  const pending = [];
  const store = createStore(state, (run) => pending.push(run));
  const renders = [];
  store.subscribe((s, parts) => renders.push([s.n, [...parts].sort()]));
  return { store, renders, frame: () => pending.splice(0).forEach((run) => run()) };
}

test("many updates before a frame render once, with every part they touched", () => {
  const { store, renders, frame } = manual({ n: 0 });
  for (let i = 0; i < 200; i++) store.update(i % 2 ? "view" : ["view", "collections"], (s) => { s.n += 1; });
  assert.deepEqual(renders, []);
  frame();
  assert.deepEqual(renders, [[200, ["collections", "view"]]]);
});

test("an update without a change still schedules a render of its part", () => {
  const { store, renders, frame } = manual({ n: 1 });
  store.update("log");
  frame();
  store.update("session");
  frame();
  assert.deepEqual(renders, [[1, ["log"]], [1, ["session"]]]);
});

test("nothing to render, no render", () => {
  const { store, renders } = manual({ n: 0 });
  store.flush();
  assert.deepEqual(renders, []);
});

test("the default schedule renders after the current task", async () => {
  const store = createStore({ n: 0 });
  const seen = [];
  store.subscribe((s, parts) => seen.push([s.n, [...parts]]));
  store.update("view", (s) => { s.n = 1; });
  store.update("view", (s) => { s.n = 2; });
  assert.deepEqual(seen, []);
  await Promise.resolve();
  assert.deepEqual(seen, [[2, ["view"]]]);
});
