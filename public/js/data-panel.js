// @ts-check
// The collections panel: the collections with live counts, the query form, the table of one
// page of the view and the pager. Rows come from a <template>, are kept by document (a row is
// rebuilt only when its document changed) and answer clicks through one listener on the table.

import { element, fromTemplate, inside, markInvalid, showMessage } from "./dom.js";
import { expireHighlights } from "./events.js";
import { captionText, displayId, formatValue } from "./format.js";
import { pageOf, parseLimit, parseSelector, parseSort } from "./query.js";

/** @typedef {import("./app.js").App} App */
/** @typedef {import("./state.js").State} State */
/** @typedef {import("./store.js").Part} Part */
/** @typedef {import("./local-copy.js").Entry} Entry */

/**
 * @param {App} app
 * @returns {(state: State, parts: Set<Part>) => void}
 */
export function mountDataPanel(app) {
  const chips = element("collections", HTMLUListElement);
  const chipTemplate = element("collection-chip", HTMLTemplateElement);
  const queryForm = element("query-form", HTMLFormElement);
  const selectorInput = element("q-selector", HTMLInputElement);
  const sortInput = element("q-sort", HTMLInputElement);
  const limitInput = element("q-limit", HTMLInputElement);
  const queryMessage = element("query-message", HTMLElement);
  const table = element("documents", HTMLTableElement);
  const caption = element("documents-caption", HTMLElement);
  const rowTemplate = element("document-row", HTMLTemplateElement);
  const fieldTemplate = element("document-field", HTMLTemplateElement);
  const previous = element("prev-page", HTMLButtonElement);
  const next = element("next-page", HTMLButtonElement);
  const pageInfo = element("page-info", HTMLElement);
  const body = table.tBodies[0];

  /** The rows on screen by document key, and the document each shows. */
  const rows = new Map();
  /** @type {WeakMap<HTMLTableRowElement, Entry>} */
  const shown = new WeakMap();
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let fadeTimer;
  let shownPage = 0;
  /** Whether the sort input is marked for a sort the documents refuse (not for one typed wrong). */
  let sortRefused = false;

  chips.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-collection]") : null;
    if (button instanceof HTMLButtonElement && button.dataset.collection) app.selectCollection(button.dataset.collection);
  });

  queryForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const selector = parseSelector(selectorInput.value);
    const sort = parseSort(sortInput.value);
    markInvalid(selectorInput, "error" in selector);
    markInvalid(sortInput, "error" in sort);
    if ("error" in selector || "error" in sort) {
      const text = "error" in selector ? selector.error : "error" in sort ? sort.error : "";
      app.store.update("view", (s) => { s.queryMessage = { text, kind: "error" }; });
      return;
    }
    app.applyQuery({ selector: selector.selector, sort: sort.keys, limit: parseLimit(limitInput.value) });
  });

  previous.addEventListener("click", () => app.showPage(shownPage - 1));
  next.addEventListener("click", () => app.showPage(shownPage + 1));

  body.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-action]") : null;
    const row = button && button.closest("tr");
    if (!(button instanceof HTMLButtonElement) || !row || !row.dataset.id) return;
    if (button.dataset.action === "edit") app.startEdit(row.dataset.id);
    if (button.dataset.action === "remove") app.removeDocument(row.dataset.id);
  });

  /** The collection buttons by name (kept, so a focused one stays focused). */
  const chipItems = new Map();

  /** @param {State} state */
  const renderChips = (state) => {
    const counts = state.all.counts();
    const items = counts.map((collection) => {
      let item = chipItems.get(collection.name);
      if (!item) {
        item = fromTemplate(chipTemplate, HTMLLIElement);
        chipItems.set(collection.name, item);
      }
      const button = inside(item, "button", HTMLButtonElement);
      const text = `${collection.name} (${collection.count})`;
      if (button.textContent !== text) button.textContent = text;
      button.dataset.collection = collection.name;
      button.setAttribute("aria-pressed", String(collection.name === state.selected));
      return item;
    });
    const names = new Set(counts.map((c) => c.name));
    for (const name of chipItems.keys()) if (!names.has(name)) chipItems.delete(name);
    if (items.length !== chips.children.length || items.some((item, i) => chips.children[i] !== item)) chips.replaceChildren(...items);
  };

  /**
   * Fills a row's cells from its document; changed fields get highlighted.
   * @param {HTMLTableRowElement} row
   * @param {Entry} entry
   * @param {State} state
   * @param {number} now
   */
  const fillRow = (row, entry, state, now) => {
    const id = displayId(entry.id);
    inside(row, "td.id", HTMLElement).textContent = id;
    const spans = [];
    for (const [name, value] of Object.entries(entry.doc)) {
      if (name === "_id") continue;
      const span = fromTemplate(fieldTemplate, HTMLSpanElement);
      span.dataset.field = name;
      if ((state.flashes.get(`${entry.key} ${name}`) || 0) > now) span.classList.add("flash");
      inside(span, ".key", HTMLElement).textContent = `${name}: `;
      inside(span, ".value", HTMLElement).textContent = formatValue(value);
      spans.push(span);
    }
    inside(row, "td.fields", HTMLElement).replaceChildren(...spans);
    inside(row, "button[data-action=edit]", HTMLButtonElement).setAttribute("aria-label", `Edit ${id}`);
    inside(row, "button[data-action=remove]", HTMLButtonElement).setAttribute("aria-label", `Remove ${id}`);
    shown.set(row, entry);
  };

  /** @param {State} state */
  const renderTable = (state) => {
    const now = Date.now();
    expireHighlights(state, now);
    const documents = state.view.documents(state.selected || "").values();
    const view = pageOf(documents, { sort: state.query.sort, limit: state.query.limit, page: state.page });
    shownPage = view.page;
    const wanted = new Set(view.rows.map((entry) => entry.key));
    for (const [key, row] of rows) {
      if (wanted.has(key)) continue;
      if (state.departures.has(key)) {
        row.classList.add("removed"); // it fades out where it was, then goes
      } else {
        row.remove();
        rows.delete(key);
      }
    }
    /** @type {Element | null} */
    let cursor = body.firstElementChild;
    for (const entry of view.rows) {
      let row = rows.get(entry.key);
      if (!row) {
        row = fromTemplate(rowTemplate, HTMLTableRowElement);
        row.dataset.id = entry.key;
        if (state.arrivals.has(entry.key)) row.classList.add("added");
        rows.set(entry.key, row);
      }
      row.classList.remove("removed");
      if (shown.get(row) !== entry) fillRow(row, entry, state, now);
      while (cursor && cursor !== row && cursor.classList.contains("removed")) cursor = cursor.nextElementSibling;
      if (cursor === row) cursor = row.nextElementSibling;
      else body.insertBefore(row, cursor);
    }
    clearTimeout(fadeTimer);
    if (state.departures.size > 0) {
      const until = Math.min(...state.departures.values());
      fadeTimer = setTimeout(() => app.store.update("view"), Math.max(0, until - Date.now()) + 10);
    }
    caption.textContent = captionText(state.selected, view.count, state.viewStatus);
    pageInfo.textContent = state.selected ? `page ${view.page + 1} of ${view.pages}` : "";
    previous.disabled = view.page === 0;
    next.disabled = view.page + 1 >= view.pages;
    // A sort the documents refuse (parallel arrays) shows no rows, as the bridge answers 400, and
    // says why as a sort typed wrong does, unless the form has a newer message to show.
    const refused = view.error !== null;
    if (refused || sortRefused) markInvalid(sortInput, refused);
    sortRefused = refused;
    showMessage(queryMessage, view.error !== null && !state.queryMessage.text ? { text: view.error, kind: "error" } : state.queryMessage);
  };

  return (state, parts) => {
    if (parts.has("collections")) renderChips(state);
    if (parts.has("view")) renderTable(state);
  };
}
