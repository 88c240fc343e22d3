// @ts-check
// The table's view of a collection: the selector (run by the bridge, as a live query), and the
// sort and paging applied in the page exactly as `GET /v1/collections/{name}` applies them
// (Sources/Bridge/Query/DocumentQuery.swift, SortSpec.swift and FieldPath.swift in
// Sources/DDP/Query), which is what Meteor's Minimongo answers: sort keys in the order written;
// a document sorts by the least of the keys its values give (the greatest, for a descending
// key), a path reaching an array giving one per element, and two paths reaching arrays must
// reach the same positions ("parallel arrays" is an error); documents whose keys are equal (or
// unordered: Infinity against Infinity) keep the order they arrived in; then skip and limit.
// Without a sort the documents stay in the order they arrived in.

import { NoOrderError, compareValues, kindOf, memberOf, membersOf, numberOf, sortBranches } from "./ejson.js";

/** @typedef {{path: string[], ascending: boolean}} SortKey */
/** @typedef {{selector: string, sort: SortKey[], limit: number}} ViewQuery */
/** @typedef {{doc: Record<string, unknown>}} Sortable */
/** @typedef {import("./ejson.js").Branch} Branch */

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
 * A dotted path as the bridge splits it: the parts between the dots, empty ones included.
 * @param {string} key
 */
const pathOf = (key) => key.split(".");

/**
 * Whether a JSON value is true to JavaScript (and to the bridge's `EJSON.isTruthy`): `false`,
 * `0`, NaN, `""` and `null` are not.
 * @param {unknown} value
 */
function isTruthy(value) {
  switch (kindOf(value)) {
    case "null": return false;
    case "bool": return value === true;
    case "number": {
      const n = numberOf(value);
      return n !== 0 && !Number.isNaN(n);
    }
    case "string": return value !== "";
    default: return true;
  }
}

/**
 * A sort direction as the bridge takes it: `"asc"`/`"ascending"` and `"desc"`/`"descending"`
 * say what they mean; a number is ascending from 0 up (so 0 and 2 are ascending, as in
 * Minimongo), a boolean or null ascending.
 * @param {unknown} value
 * @returns {boolean | null} ascending, or null when it is not a direction
 */
function direction(value) {
  if (value === "asc" || value === "ascending") return true;
  if (value === "desc" || value === "descending") return false;
  switch (kindOf(value)) {
    case "number": {
      const n = numberOf(value);
      return Number.isNaN(n) ? null : n >= 0;
    }
    case "bool":
    case "null":
      return true;
    default:
      return null;
  }
}

/**
 * Parses a sort as typed, as the bridge parses `?sort=` (SortSpec's init):
 * `{"field": 1 | -1 | "asc" | "desc", …}` in the order written, or `[["field", "asc" | "desc"],
 * ["field"], "field", …]`; empty text, and a falsy value (`null`, `false`, `0`), is no sort.
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
  if (!isTruthy(value)) return { keys: [] };
  /** @type {SortKey[]} */
  const keys = [];
  /**
   * @param {string} key
   * @param {unknown} written its direction as written
   * @returns {string | null} the refusal
   */
  const add = (key, written) => {
    const ascending = direction(written);
    if (ascending === null) return `Sort: a sort direction must be 1, -1, "asc" or "desc", not ${JSON.stringify(written)}`;
    if (key === "") return "Sort: keys must not be empty";
    if (key.startsWith("$")) return `Sort: unsupported key ${key}`;
    keys.push({ path: pathOf(key), ascending });
    return null;
  };
  switch (kindOf(value)) {
    case "object": {
      // The names as written (JSON.parse puts integer-like ones first); inside `$escape`, as parsed.
      const object = /** @type {Record<string, unknown>} */ (value);
      const escaped = Object.keys(object).length === 1 && isObject(object.$escape);
      for (const key of escaped ? membersOf(object).map(([name]) => name) : keysInOrder(trimmed)) {
        const refused = add(key, memberOf(value, key));
        if (refused) return { error: refused };
      }
      return { keys };
    }
    case "array":
      for (const item of /** @type {unknown[]} */ (value)) {
        /** @type {string | null} */
        let refused;
        if (typeof item === "string") {
          refused = add(item, 1);
        } else if (Array.isArray(item) && item.length >= 1 && item.length <= 2) {
          if (typeof item[0] !== "string") return { error: "Sort: an entry's field must be a string" };
          refused = add(item[0], item.length === 1 ? 1 : item[1]);
        } else {
          return { error: 'Sort: entries must be "field" or ["field", "asc"|"desc"]' };
        }
        if (refused) return { error: refused };
      }
      return { keys };
    default:
      return { error: 'Sort: must be an object like {"field": 1} or an array like [["field", "desc"]]' };
  }
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

/** A sort the documents refuse (the bridge answers 400 `invalid sort: …`). */
export class SortError extends Error {
  /** @param {string} reason */
  constructor(reason) {
    super(reason);
    this.name = "SortError";
  }
}

/** @param {SortKey[]} keys */
const parallelArrays = (keys) => new SortError(`cannot sort by parallel arrays (${keys.map((key) => key.path.join(".")).join(", ")})`);

/**
 * The branches with each array found replaced by its elements (each with its position), unless
 * it was found by an explicit index (`expandArraysInBranches`): an empty array gives nothing.
 * @param {Branch[]} branches
 * @returns {Branch[]}
 */
function expand(branches) {
  /** @type {Branch[]} */
  const out = [];
  for (const branch of branches) {
    if (!Array.isArray(branch.value) || branch.dontIterate) {
      out.push({ value: branch.value, dontIterate: false, indices: branch.indices });
      continue;
    }
    branch.value.forEach((element, i) => out.push({ value: element, dontIterate: false, indices: [...(branch.indices || []), i] }));
  }
  return out;
}

/**
 * The key a document sorts by, as the bridge's `SortSpec.key(of:)` (Minimongo's
 * `_getMinKeyFromDoc`): one value per sort key (`undefined`: missing). A key whose path reaches
 * no value counts as one missing value; one that reaches arrays gives a value per position, and
 * the document's key is the least under the sort of the keys its positions give (so the least
 * element ascending, the greatest descending).
 * @param {Record<string, unknown>} document
 * @param {SortKey[]} keys
 * @returns {unknown[]}
 * @throws {SortError} when two keys reach arrays at different positions ("parallel arrays")
 */
export function sortKeyOf(document, keys) {
  /** @type {{order: string[], set: Set<string>} | null} the positions the first key through an array reached */
  let known = null;
  /** @type {({sole: true, value: unknown} | {sole: false, byPosition: Map<string, unknown>})[]} */
  const values = [];
  for (const key of keys) {
    let branches = expand(sortBranches(document, key.path));
    if (branches.length === 0) branches = [{ value: undefined, dontIterate: false, indices: null }];
    /** @type {{value: unknown} | null} */
    let sole = null;
    /** @type {Map<string, unknown>} */
    const byPosition = new Map();
    /** @type {string[]} */
    const order = [];
    for (const branch of branches) {
      if (branch.indices === null) {
        if (branches.length !== 1) throw new SortError("cannot sort: several values but no array");
        sole = { value: branch.value };
        continue;
      }
      const position = branch.indices.join(",");
      if (byPosition.has(position)) throw new SortError(`cannot sort by ${key.path.join(".")}: it reaches one position twice`);
      byPosition.set(position, branch.value);
      order.push(position);
      if (known && !known.set.has(position)) throw parallelArrays(keys);
    }
    if (known) {
      if (sole === null && known.order.length !== byPosition.size) throw parallelArrays(keys);
    } else if (order.length > 0) {
      known = { order, set: new Set(order) };
    }
    values.push(sole ? { sole: true, value: sole.value } : { sole: false, byPosition });
  }
  if (!known) return values.map((v) => (v.sole ? v.value : undefined));
  /** @type {unknown[] | null} */
  let least = null;
  for (const position of known.order) {
    const candidate = values.map((v) => (v.sole ? v.value : v.byPosition.get(position)));
    if (least === null || compareSortKeys(keys, candidate, least) < 0) least = candidate;
  }
  return least || [];
}

/**
 * Two sort keys under the sort, part by part (the bridge's `SortSpec.compare`): the first part
 * not equal decides; one that is unordered (Infinity against Infinity) ends the comparison
 * unordered.
 * @param {SortKey[]} keys
 * @param {unknown[]} a
 * @param {unknown[]} b
 * @returns {number} -1, 0 or 1; NaN when unordered
 * @throws {SortError} for two regular expressions, which have no order
 */
export function compareSortKeys(keys, a, b) {
  for (let i = 0; i < keys.length && i < a.length && i < b.length; i++) {
    let c;
    try {
      c = compareValues(a[i], b[i]);
    } catch (error) {
      if (error instanceof NoOrderError) throw new SortError(`cannot sort by ${keys[i].path.join(".")}: ${error.message}`);
      throw error;
    }
    if (c !== 0) return keys[i].ascending ? c : -c;
  }
  return 0;
}

/**
 * The documents in the order the bridge answers them: by their sort keys (each computed once),
 * documents whose keys are equal or unordered in the order they arrived in (the order given);
 * without a sort, or with one document or none, the order given.
 * @template {Sortable} T
 * @param {T[]} documents in the order they arrived in
 * @param {SortKey[]} keys
 * @returns {T[]}
 * @throws {SortError} when the documents cannot be sorted so (parallel arrays, regular expressions)
 */
export function sortDocuments(documents, keys) {
  if (keys.length === 0 || documents.length < 2) return documents.slice();
  const ranked = documents.map((item, arrival) => ({ item, arrival, key: sortKeyOf(item.doc, keys) }));
  ranked.sort((a, b) => {
    const c = compareSortKeys(keys, a.key, b.key);
    return c < 0 ? -1 : c > 0 ? 1 : a.arrival - b.arrival;
  });
  return ranked.map((r) => r.item);
}

/**
 * One page of a view: the documents sorted, then `page * limit` skipped and `limit` kept, as
 * the bridge answers `?sort=…&skip=…&limit=…`. A page past the end is brought back to the last.
 * When the sort fails (the bridge answers 400), no rows and the reason.
 * @template {Sortable} T
 * @param {Iterable<T>} documents in the order they arrived in (the local copy's order)
 * @param {{sort: SortKey[], limit: number, page: number}} view
 * @returns {{rows: T[], count: number, page: number, pages: number, error: string | null}}
 */
export function pageOf(documents, view) {
  const all = Array.from(documents);
  const count = all.length;
  let sorted;
  try {
    sorted = sortDocuments(all, view.sort);
  } catch (error) {
    if (!(error instanceof SortError)) throw error;
    return { rows: [], count, page: 0, pages: 1, error: `Sort: ${error.message}` };
  }
  const pages = Math.max(1, Math.ceil(count / view.limit));
  const page = Math.min(Math.max(0, view.page), pages - 1);
  const rows = sorted.slice(page * view.limit, (page + 1) * view.limit);
  return { rows, count, page, pages, error: null };
}
