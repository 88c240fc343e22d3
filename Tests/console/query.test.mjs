// The table's view in the page: the sort and paging of `GET /v1/collections/{name}`
// (Sources/Bridge/Query/DocumentQuery.swift), and the query form's parsing.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { wireId } from "../../public/api.js";
import { comparator, keysInOrder, pageOf, parseLimit, parseSelector, parseSort } from "../../public/js/query.js";

/** A document as the local copy holds it. */
const entry = (doc) => ({ key: JSON.stringify(doc._id), wire: wireId(doc._id), doc });
const ids = (rows) => rows.map((row) => row.doc._id);

describe("keysInOrder", () => {
  test("keeps the order written, integer-like names included (JSON.parse moves those first)", () => {
    const text = '{"b": 1, "10": -1, "a.c": 1, "2": 1}';
    assert.deepEqual(Object.keys(JSON.parse(text)), ["2", "10", "b", "a.c"]);
    assert.deepEqual(keysInOrder(text), ["b", "10", "a.c", "2"]);
  });
  test("skips nested values and strings with quotes, braces and escapes", () => {
    assert.deepEqual(keysInOrder('{"x\\"}": {"inner": [1, {"y": "}"}]}, "z": "a\\\\", "w": null}'), ['x"}', "z", "w"]);
  });
  test("a repeated name counts once, where it first appears", () => {
    assert.deepEqual(keysInOrder('{"a": 1, "b": 1, "a": -1}'), ["a", "b"]);
  });
});

describe("parseSort takes what the bridge takes", () => {
  test("empty is no sort", () => assert.deepEqual(parseSort("  "), { keys: [] }));
  test("an object, in the order written, with every direction spelling", () => {
    assert.deepEqual(parseSort('{"n": -1, "2": 1, "a.b": "desc", "c": "ascending", "d": "descending", "e": "asc"}'), {
      keys: [
        { path: ["n"], ascending: false },
        { path: ["2"], ascending: true },
        { path: ["a", "b"], ascending: false },
        { path: ["c"], ascending: true },
        { path: ["d"], ascending: false },
        { path: ["e"], ascending: true },
      ],
    });
  });
  test("an array of names or [name, direction] pairs", () => {
    assert.deepEqual(parseSort('["a", ["b", "desc"], ["c", 1]]'), {
      keys: [{ path: ["a"], ascending: true }, { path: ["b"], ascending: false }, { path: ["c"], ascending: true }],
    });
  });
  test("empty path segments are dropped, as Swift's split drops them", () => {
    assert.deepEqual(parseSort('{"a..b.": 1}'), { keys: [{ path: ["a", "b"], ascending: true }] });
  });
  test("refusals, with a reason", () => {
    assert.match(parseSort('{"n": 2}').error, /direction must be 1, -1/);
    assert.match(parseSort('[["n", "up"]]').error, /direction/);
    assert.match(parseSort("[3]").error, /entries must be/);
    assert.match(parseSort('"n"').error, /must be an object or an array/);
    assert.match(parseSort("{n: 1}").error, /not valid JSON/);
  });
});

describe("parseSelector and parseLimit", () => {
  test("a selector is an object, sent as written", () => {
    assert.deepEqual(parseSelector(' {"b": 1, "a": {"$gt": 2}} '), { selector: '{"b": 1, "a": {"$gt": 2}}' });
    assert.deepEqual(parseSelector(""), { selector: "" });
    assert.match(parseSelector("[1]").error, /must be a JSON object/);
    assert.match(parseSelector("{").error, /not valid JSON/);
  });
  test("a page size is kept within 1…1000", () => {
    assert.equal(parseLimit("25"), 25);
    assert.equal(parseLimit("0"), 20);
    assert.equal(parseLimit("abc"), 20);
    assert.equal(parseLimit("-4"), 1);
    assert.equal(parseLimit("5000"), 1000);
    assert.equal(parseLimit("2.7"), 2);
  });
});

describe("the bridge's order", () => {
  const docs = [
    { _id: "c", n: 2, o: { p: "x" } },
    { _id: "a", n: 1 },
    { _id: "b", n: 2, o: { p: "a" } },
    { _id: "-d", n: null }, // wire id "--d"
    { _id: "e", n: "2" },
  ].map(entry);

  test("without a sort: by wire id", () => {
    assert.deepEqual(ids([...docs].sort(comparator([]))), ["-d", "a", "b", "c", "e"]);
  });
  test("by keys in turn, ties by wire id; a missing value is null", () => {
    const keys = parseSort('{"n": -1, "o.p": 1}').keys;
    assert.deepEqual(ids([...docs].sort(comparator(keys))), ["e", "b", "c", "a", "-d"]);
  });
  test("by _id", () => {
    assert.deepEqual(ids([...docs].sort(comparator(parseSort('{"_id": -1}').keys))), ["e", "c", "b", "a", "-d"]);
  });
  test("ties broken by Swift's string order of wire ids, not UTF-16's", () => {
    const tied = [entry({ _id: "z-\u{1F600}", n: 7 }), entry({ _id: "z-\ue000", n: 7 })];
    assert.deepEqual(ids(tied.sort(comparator(parseSort('{"n": 1}').keys))), ["z-\ue000", "z-\u{1F600}"]);
  });
});

describe("pageOf", () => {
  const docs = Array.from({ length: 45 }, (_, i) => entry({ _id: `d${String(i).padStart(2, "0")}`, n: i % 7 }));
  const sort = parseSort('{"n": 1}').keys;

  test("skip and limit after the sort; the count is every match", () => {
    const second = pageOf(docs, { sort, limit: 10, page: 1 });
    assert.equal(second.count, 45);
    assert.equal(second.pages, 5);
    assert.equal(second.page, 1);
    const all = [...docs].sort(comparator(sort));
    assert.deepEqual(ids(second.rows), ids(all.slice(10, 20)));
  });
  test("the last page is short", () => {
    assert.equal(pageOf(docs, { sort, limit: 10, page: 4 }).rows.length, 5);
  });
  test("a page past the end comes back to the last", () => {
    const past = pageOf(docs, { sort, limit: 10, page: 9 });
    assert.equal(past.page, 4);
    assert.equal(past.rows.length, 5);
  });
  test("nothing: one empty page", () => {
    assert.deepEqual(pageOf([], { sort, limit: 10, page: 3 }), { rows: [], count: 0, page: 0, pages: 1 });
  });
});
