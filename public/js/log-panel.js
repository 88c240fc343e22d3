// @ts-check
// The events panel: the session's raw events, newest first, with their ids; paused (events are
// held, and counted) and cleared on request.

import { element, fromTemplate, inside } from "./dom.js";
import { logText } from "./format.js";
import { LOG_LIMIT, clearLog, toggleLogPause } from "./state.js";

/** @typedef {import("./app.js").App} App */
/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Part} Part */

/**
 * @param {App} app
 * @returns {(state: State, parts: Set<Part>) => void}
 */
export function mountLogPanel(app) {
  const pause = element("pause-log", HTMLButtonElement);
  const clear = element("clear-log", HTMLButtonElement);
  const info = element("log-info", HTMLElement);
  const list = element("event-log", HTMLOListElement);
  const template = element("log-entry", HTMLTemplateElement);

  pause.addEventListener("click", () => app.store.update("log", (s) => toggleLogPause(s.log)));
  clear.addEventListener("click", () => app.store.update("log", (s) => clearLog(s.log)));

  /** The newest entry on screen, and the log's generation it belongs to. */
  let shownSeq = 0;
  let shownGeneration = 0;

  return (state, parts) => {
    if (!parts.has("log")) return;
    const log = state.log;
    if (log.generation !== shownGeneration) {
      list.replaceChildren();
      shownGeneration = log.generation;
    }
    const fresh = [];
    for (let i = log.entries.length - 1; i >= 0 && log.entries[i].seq > shownSeq; i--) {
      const entry = log.entries[i];
      const item = fromTemplate(template, HTMLLIElement);
      item.dataset.event = entry.name;
      inside(item, ".event-id", HTMLElement).textContent = entry.id ? `#${entry.id}` : "–";
      inside(item, ".event-name", HTMLElement).textContent = entry.name;
      inside(item, ".event-data", HTMLElement).textContent = logText(entry.text);
      fresh.push(item);
    }
    if (log.entries.length > 0) shownSeq = Math.max(shownSeq, log.entries[log.entries.length - 1].seq);
    list.prepend(...fresh.slice(0, LOG_LIMIT));
    while (list.childElementCount > LOG_LIMIT) list.lastElementChild?.remove();
    pause.setAttribute("aria-pressed", String(log.paused));
    pause.textContent = log.paused ? "Resume" : "Pause";
    info.textContent = log.paused ? `paused, ${log.held.length} held` : "";
  };
}
