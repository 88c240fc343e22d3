// @ts-check
// A small store: one state object, changed only through `update`, which names the parts of the
// page it touched; the render step runs once per frame for everything updated since the last.

/**
 * The parts of the page a change can touch; each panel renders the parts it shows.
 * @typedef {"session" | "subscriptions" | "collections" | "view" | "editor" | "methods" | "log"} Part
 */

/**
 * @template S
 * @typedef {object} Store
 * @property {S} state the current state (read it; change it only inside `update`)
 * @property {(parts: Part | Part[], change?: (state: S) => void) => void} update applies a change and schedules a render of those parts
 * @property {(render: (state: S, parts: Set<Part>) => void) => void} subscribe adds a render step
 * @property {() => void} flush renders now what is pending
 */

/**
 * @template S
 * @param {S} state the initial state
 * @param {(run: () => void) => void} [schedule] when to render (the page: the next animation frame)
 * @returns {Store<S>}
 */
export function createStore(state, schedule = (run) => queueMicrotask(run)) {
  /** @type {((state: S, parts: Set<Part>) => void)[]} */
  const renders = [];
  /** @type {Set<Part>} */
  let dirty = new Set();
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    if (dirty.size === 0) return;
    const parts = dirty;
    dirty = new Set();
    for (const render of renders) render(state, parts);
  };

  return {
    state,
    update(parts, change) {
      if (change) change(state);
      for (const part of Array.isArray(parts) ? parts : [parts]) dirty.add(part);
      if (!scheduled) {
        scheduled = true;
        schedule(flush);
      }
    },
    subscribe(render) {
      renders.push(render);
    },
    flush,
  };
}
