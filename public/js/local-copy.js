// @ts-check
// A local copy of documents kept from the bridge's event stream: `added`, `changed` and
// `removed` apply one by one; `reset` starts a new copy that the snapshot's `added` events
// fill and its `snapshot` marker puts in place (until then the old copy stays, so a table
// never shows a half-loaded snapshot). Each collection keeps its documents in the order they
// arrived in: the order the table keeps for ties and shows without a sort, as the bridge does
// (a document removed and added again arrives anew; an `added` for one held replaces it where
// it is; a snapshot's documents arrive in the order the snapshot lists them).

import { wireId } from "../api.js";
import { compareStrings } from "./ejson.js";

/**
 * One document of the copy. `key` is its `_id` as JSON (the table's row id); `wire` is the id as
 * the bridge's URLs and sort take it; `version` grows with every change.
 * @typedef {{key: string, id: unknown, wire: string, doc: Record<string, unknown>, version: number}} Entry
 */

/**
 * What applying one event did, for the render step (null: nothing).
 * - `added` / `changed` / `removed`: one document (`fields`: the names whose value changed)
 * - `reset`: a snapshot is coming; `snapshot`: it is in place
 * @typedef {{type: "added" | "changed" | "removed", collection: string, key: string, fields: string[]}
 *   | {type: "reset"} | {type: "snapshot", count: number}} Applied
 */

/** @typedef {Map<string, Map<string, Entry>>} Collections */

/**
 * The `_id` of a document as a row id.
 * @param {unknown} id
 * @returns {string}
 */
export const keyOf = (id) => JSON.stringify(id);

export class LocalCopy {
  /**
   * @param {{keepFields?: boolean}} [options] without fields, the copy only counts documents
   */
  constructor(options = {}) {
    this.keepFields = options.keepFields !== false;
    /** @type {Collections} */
    this.collections = new Map();
    /** @type {Collections | null} the copy a snapshot is filling, between `reset` and `snapshot` */
    this.pending = null;
    /** Whether a snapshot has been put in place (the copy is complete). */
    this.synced = false;
    /** Grows with every change of the copy in place. */
    this.version = 0;
  }

  /**
   * The documents of one collection in the order they arrived in (empty when there are none).
   * @param {string} name
   * @returns {Map<string, Entry>}
   */
  documents(name) {
    return this.collections.get(name) || new Map();
  }

  /**
   * The collections with their counts, sorted by name as the bridge sorts them.
   * @returns {{name: string, count: number}[]}
   */
  counts() {
    return [...this.collections]
      .filter(([, documents]) => documents.size > 0)
      .map(([name, documents]) => ({ name, count: documents.size }))
      .sort((a, b) => compareStrings(a.name, b.name));
  }

  /**
   * Applies one event of the stream; events that are not about documents are ignored.
   * @param {string} name the event's name
   * @param {any} data its parsed `data`
   * @returns {Applied | null}
   */
  apply(name, data) {
    switch (name) {
      case "reset":
        this.pending = new Map();
        return { type: "reset" };
      case "snapshot":
        if (this.pending) this.collections = this.pending;
        this.pending = null;
        this.synced = true;
        this.version++;
        return { type: "snapshot", count: data && typeof data.count === "number" ? data.count : 0 };
      case "added":
      case "changed":
      case "removed":
        if (!data || typeof data.collection !== "string") return null;
        return this.applyDocument(name, data);
      default:
        return null;
    }
  }

  /**
   * @param {"added" | "changed" | "removed"} name
   * @param {{collection: string, id: unknown, fields?: Record<string, unknown>, cleared?: string[]}} data
   * @returns {Applied | null}
   */
  applyDocument(name, data) {
    const target = this.pending || this.collections;
    let documents = target.get(data.collection);
    if (!documents) {
      documents = new Map();
      target.set(data.collection, documents);
    }
    const key = keyOf(data.id);
    const before = documents.get(key);
    const inPlace = target === this.collections;
    if (name === "removed") {
      if (!before) return null;
      if (inPlace) this.version++;
      documents.delete(key);
      if (documents.size === 0) target.delete(data.collection);
      return inPlace ? { type: "removed", collection: data.collection, key, fields: [] } : null;
    }
    const fields = this.keepFields ? data.fields || {} : {};
    if (inPlace) this.version++;
    if (name === "added" || !before) {
      /** @type {Record<string, unknown>} */
      const doc = { _id: data.id };
      for (const [field, value] of Object.entries(fields)) if (field !== "_id") doc[field] = value;
      const entry = { key, id: data.id, wire: wireId(data.id), doc, version: before ? before.version + 1 : 0 };
      documents.set(key, entry);
      const changed = before ? changedFields(before.doc, doc) : Object.keys(fields);
      return inPlace ? { type: before ? "changed" : "added", collection: data.collection, key, fields: changed } : null;
    }
    const doc = { ...before.doc };
    for (const [field, value] of Object.entries(fields)) if (field !== "_id") doc[field] = value;
    for (const field of this.keepFields ? data.cleared || [] : []) delete doc[field];
    documents.set(key, { ...before, doc, version: before.version + 1 });
    return inPlace ? { type: "changed", collection: data.collection, key, fields: changedFields(before.doc, doc) } : null;
  }
}

/**
 * The fields of `after` whose value differs from `before` (set, changed or new).
 * @param {Record<string, unknown>} before
 * @param {Record<string, unknown>} after
 * @returns {string[]}
 */
export function changedFields(before, after) {
  return Object.keys(after).filter((field) => field !== "_id" && JSON.stringify(before[field]) !== JSON.stringify(after[field]));
}
