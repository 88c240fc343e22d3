// @ts-check
// The table's view of a collection: the selector (run by the bridge, as a live query), and the
// sort and paging applied in the page exactly as `GET /v1/collections/{name}` applies them
// (Sources/Bridge/Query/DocumentQuery.swift): sort keys in the order written, documents equal
// on every key ordered by their wire id, then skip and limit.

import { compareStrings, compareValues, valueAt } from "./ejson.js";

/** @typedef {{path: string[], ascending: boolean}} SortKey */
/** @typedef {{selector: string, sort: SortKey[], limit: number}} ViewQuery */
/** @typedef {{wire: string, doc: Record<string, unknown>}} Sortable */

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 1000;

/**
 * The members of a JSON object's text in the order written, each once (JSON.parse puts
 * integer-like names first; the bridge keeps the order written, and so must a sort).
 * The text must be valid JSON.
 * @param {string} text
 * @returns {string[]}
 */
export function keysInOrder(text) {
  let i = 0;
  const skipSpace = () => { while (i < text.length && " \t\r\n".includes(text[i])) i++; };
  const skipString = () => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return text.slice(start, i);
  };
  const skipValue = () => {
    if (text[i] === '"') {
      skipString();
      return;
    }
    if (text[i] === "{" || text[i] === "[") {
      let depth = 0;
      do {
        if (text[i] === '"') {
          skipString();
          continue;
        }
        if (text[i] === "{" || text[i] === "[") depth++;
        if (text[i] === "}" || text[i] === "]") depth--;
        i++;
      } while (depth > 0);
      return;
    }
    while (i < text.length && !",}] \t\r\n".includes(text[i])) i++;
  };
  /** @type {string[]} */
  const keys = [];
  skipSpace();
  if (text[i] !== "{") return keys;
  i++;
  for (;;) {
    skipSpace();
    if (i >= text.length || text[i] === "}") break;
    const key = JSON.parse(skipString());
    if (!keys.includes(key)) keys.push(key);
    skipSpace();
    i++; // ':'
    skipSpace();
    skipValue();
    skipSpace();
    if (text[i] === ",") i++;
  }
  return keys;
}

/** @param {unknown} value @returns {value is Record<string, unknown>} */
const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * A dotted path as the bridge splits it (empty segments dropped).
 * @param {string} key
 */
const pathOf = (key) => key.split(".").filter((part) => part !== "");

/**
 * A sort direction as the bridge takes it.
 * @param {unknown} value
 * @returns {boolean | null} ascending, or null when it is not a direction
 */
function direction(value) {
  if (value === 1 || value === "asc" || value === "ascending") return true;
  if (value === -1 || value === "desc" || value === "descending") return false;
  return null;
}

/**
 * Parses a sort as typed: `{"field": 1 | -1, …}` in the order written, or
 * `[["field", "asc" | "desc"], …]` or `["field", …]`; empty text is no sort.
 * @param {string} text
 * @returns {{keys: SortKey[]} | {error: string}}
 */
export function parseSort(text) {
  const trimmed = text.trim();
  if (trimmed === "") return { keys: [] };
  let value;
  try {
    value = JSON.parse(trimmed);
  } catch (error) {
    return { error: `Sort is not valid JSON: ${/** @type {Error} */ (error).message}` };
  }
  const bad = { error: 'Sort: a sort direction must be 1, -1, "asc" or "desc"' };
  if (isObject(value)) {
    /** @type {SortKey[]} */
    const keys = [];
    for (const key of keysInOrder(trimmed)) {
      const ascending = direction(value[key]);
      if (ascending === null) return bad;
      keys.push({ path: pathOf(key), ascending });
    }
    return { keys };
  }
  if (Array.isArray(value)) {
    /** @type {SortKey[]} */
    const keys = [];
    for (const item of value) {
      if (typeof item === "string") {
        keys.push({ path: pathOf(item), ascending: true });
      } else if (Array.isArray(item) && item.length === 2 && typeof item[0] === "string") {
        const ascending = direction(item[1]);
        if (ascending === null) return bad;
        keys.push({ path: pathOf(item[0]), ascending });
      } else {
        return { error: 'Sort: entries must be "field" or ["field", "asc"|"desc"]' };
      }
    }
    return { keys };
  }
  return { error: "Sort: must be an object or an array" };
}

/**
 * Checks a selector as typed: a JSON object, or empty (everything). The bridge checks its
 * operators when the view's stream opens. Returns the text to send (trimmed, as written).
 * @param {string} text
 * @returns {{selector: string} | {error: string}}
 */
export function parseSelector(text) {
  const trimmed = text.trim();
  if (trimmed === "") return { selector: "" };
  try {
    return isObject(JSON.parse(trimmed)) ? { selector: trimmed } : { error: "Selector: must be a JSON object" };
  } catch (error) {
    return { error: `Selector is not valid JSON: ${/** @type {Error} */ (error).message}` };
  }
}

/**
 * A page size as typed, kept within 1…1000 (20 when it is not a number).
 * @param {string} text
 */
export function parseLimit(text) {
  return Math.min(MAX_LIMIT, Math.max(1, Math.floor(Number(text)) || DEFAULT_LIMIT));
}

/** @typedef {{wire: string, values: unknown[]}} Decorated a document's wire id and its sort values */

/**
 * @param {Sortable} item
 * @param {SortKey[]} keys
 * @returns {Decorated}
 */
const decorate = (item, keys) => ({ wire: item.wire, values: keys.map((key) => valueAt(item.doc, key.path)) });

/**
 * @param {SortKey[]} keys
 * @param {Decorated} a
 * @param {Decorated} b
 */
function compareDecorated(keys, a, b) {
  for (let i = 0; i < keys.length; i++) {
    const c = compareValues(a.values[i], b.values[i]);
    if (c !== 0) return keys[i].ascending ? c : -c;
  }
  return compareStrings(a.wire, b.wire);
}

/**
 * The comparison the bridge sorts by: each key in turn (a missing value is null), then the wire id.
 * @param {SortKey[]} keys
 * @returns {(a: Sortable, b: Sortable) => number}
 */
export function comparator(keys) {
  return (a, b) => compareDecorated(keys, decorate(a, keys), decorate(b, keys));
}

/**
 * One page of a view: the documents sorted, then `page * limit` skipped and `limit` kept, as
 * the bridge answers `?sort=…&skip=…&limit=…`. A page past the end is brought back to the last.
 * Each document's sort values are read once, not at every comparison.
 * @template {Sortable} T
 * @param {Iterable<T>} documents
 * @param {{sort: SortKey[], limit: number, page: number}} view
 * @returns {{rows: T[], count: number, page: number, pages: number}}
 */
export function pageOf(documents, view) {
  const keys = view.sort;
  const decorated = Array.from(documents, (item) => ({ item, key: decorate(item, keys) }));
  decorated.sort((a, b) => compareDecorated(keys, a.key, b.key));
  const count = decorated.length;
  const pages = Math.max(1, Math.ceil(count / view.limit));
  const page = Math.min(Math.max(0, view.page), pages - 1);
  const rows = decorated.slice(page * view.limit, (page + 1) * view.limit).map((d) => d.item);
  return { rows, count, page, pages };
}
