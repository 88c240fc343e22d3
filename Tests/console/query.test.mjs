// The table's view in the page: the sort and paging of `GET /v1/collections/{name}`
// (Sources/Bridge/Query/DocumentQuery.swift, Sources/DDP/Query/SortSpec.swift), which answer what
// Meteor's Minimongo answers, and the query form's parsing.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import { wireId } from "../../public/api.js";
import {
  SortError, compareSortKeys, keysInOrder, pageOf, parseLimit, parseSelector, parseSort, sortDocuments, sortKeyOf,
} from "../../public/js/query.js";

/** A document as the local copy holds it. */
const entry = (doc) => ({ key: JSON.stringify(doc._id), wire: wireId(doc._id), doc });
const ids = (rows) => rows.map((row) => row.doc._id);
const keys = (text) => parseSort(text).keys;
/** The ids of `docs` (given in arrival order) as the sort orders them. */
const sorted = (docs, sort) => ids(sortDocuments(docs.map(entry), keys(sort)));

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
  test("empty, or a falsy value, is no sort", () => {
    for (const text of ["  ", "null", "false", "0", '""', '{"$InfNaN": 0}', "{}", "[]"]) assert.deepEqual(parseSort(text), { keys: [] }, text);
  });
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
  test("a number is ascending from 0 up (0 and 2 too), a boolean or null ascending", () => {
    assert.deepEqual(keys('{"a": 0, "b": 2, "c": -0.5, "d": true, "e": false, "f": null, "g": {"$InfNaN": -1}}').map((k) => k.ascending),
      [true, true, false, true, true, true, false]);
  });
  test("an array of names, [name] and [name, direction] pairs", () => {
    assert.deepEqual(parseSort('["a", ["b", "desc"], ["c", 1], ["d"], ["e", -1]]'), {
      keys: [
        { path: ["a"], ascending: true }, { path: ["b"], ascending: false }, { path: ["c"], ascending: true },
        { path: ["d"], ascending: true }, { path: ["e"], ascending: false },
      ],
    });
  });
  test("empty path parts are keys, as in JavaScript", () => {
    assert.deepEqual(parseSort('{"a..b.": 1}'), { keys: [{ path: ["a", "", "b", ""], ascending: true }] });
  });
  test("refusals, with a reason", () => {
    assert.match(parseSort('{"n": "up"}').error, /direction must be 1, -1, "asc" or "desc", not "up"/);
    assert.match(parseSort('{"n": [1]}').error, /direction/);
    assert.match(parseSort('[["n", "up"]]').error, /direction/);
    assert.match(parseSort("[3]").error, /entries must be/);
    assert.match(parseSort('[["a", 1, 2]]').error, /entries must be/);
    assert.match(parseSort("[[3, 1]]").error, /field must be a string/);
    assert.match(parseSort('{"": 1}').error, /keys must not be empty/);
    assert.match(parseSort('{"$natural": 1}').error, /unsupported key \$natural/);
    assert.match(parseSort('"n"').error, /must be an object .* or an array/);
    assert.match(parseSort('{"$date": 5}').error, /must be an object .* or an array/, "a typed EJSON value is not an object");
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

describe("the bridge's order (Minimongo's)", () => {
  test("without a sort: the order the documents arrived in", () => {
    assert.deepEqual(sorted([{ _id: "c" }, { _id: "a" }, { _id: "b" }], ""), ["c", "a", "b"]);
  });
  test("a missing value comes before null", () => {
    const docs = [{ _id: "null", n: null }, { _id: "one", n: 1 }, { _id: "missing" }, { _id: "empty", n: [] }];
    assert.deepEqual(sorted(docs, '{"n": 1}'), ["missing", "empty", "null", "one"], "an empty array is no value: missing");
    assert.deepEqual(sorted(docs, '{"n": -1}'), ["one", "null", "missing", "empty"], "ties in arrival order, descending too");
  });
  test("an array sorts by its least element ascending, its greatest descending", () => {
    const docs = [{ _id: "a", n: [1, 5] }, { _id: "b", n: 3 }, { _id: "c", n: [0, 4] }, { _id: "d", n: [2, "x"] }];
    assert.deepEqual(sorted(docs, '{"n": 1}'), ["c", "a", "d", "b"]);
    assert.deepEqual(sorted(docs, '{"n": -1}'), ["d", "a", "c", "b"], '"x" is greater than every number');
  });
  test("an array inside an array is one element, compared as an array", () => {
    const docs = [{ _id: "a", n: [[2], 9] }, { _id: "b", n: [[1, 5]] }, { _id: "c", n: 100 }];
    assert.deepEqual(sorted(docs, '{"n": 1}'), ["a", "c", "b"], "9 < 100 < [1, 5] (numbers before arrays)");
    assert.deepEqual(sorted(docs, '{"n": -1}'), ["a", "b", "c"], "[2] > [1, 5] > 100");
  });
  test("a path into an array of objects: items.k over [{k: b}, {k: c}] and []", () => {
    const docs = [
      { _id: "d1", items: [{ k: "b" }, { k: "c" }] },
      { _id: "d2", items: [] },
      { _id: "d3", items: [{ k: "a" }, 7] },
      { _id: "d4", items: { k: "bb" } },
      { _id: "d5", items: [{ k: "d" }, { other: 1 }] },
    ];
    assert.deepEqual(sorted(docs, '{"items.k": 1}'), ["d2", "d5", "d3", "d1", "d4"], "[] and an element without k: missing");
    assert.deepEqual(sorted(docs, '{"items.k": -1}'), ["d5", "d1", "d4", "d3", "d2"]);
  });
  test("a numeric part after an array is an index: that element, an array there not expanded", () => {
    const docs = [{ _id: "a", n: [[5, 1], 0] }, { _id: "b", n: [[2], 9] }, { _id: "c", n: [3] }, { _id: "d", n: [] }];
    assert.deepEqual(sorted(docs, '{"n.0": 1}'), ["d", "c", "b", "a"], "missing, 3, then [2] < [5, 1] as arrays");
  });
  test("two paths that reach arrays at different positions: parallel arrays, an error", () => {
    const docs = [{ _id: "a", x: [1, 2], y: [1, 2, 3] }, { _id: "b", x: 1, y: 2 }].map(entry);
    assert.throws(() => sortDocuments(docs, keys('{"x": 1, "y": 1}')), (error) => {
      assert.ok(error instanceof SortError);
      assert.equal(error.message, "cannot sort by parallel arrays (x, y)");
      return true;
    });
    assert.throws(() => sortDocuments(docs, keys('{"x": 1, "x.0": 1}')), /parallel arrays \(x, x\.0\)/);
  });
  test("paths that reach the same positions sort together, position by position", () => {
    const docs = [
      { _id: "a", items: [{ k: 2, n: "z" }, { k: 1, n: "y" }] },
      { _id: "b", items: [{ k: 1, n: "x" }, { k: 3, n: "a" }] },
    ];
    assert.deepEqual(sorted(docs, '{"items.k": 1, "items.n": 1}'), ["b", "a"], "least keys: [1, y] and [1, x]");
    assert.deepEqual(sorted(docs, '{"items.k": 1, "items.n": -1}'), ["a", "b"]);
    assert.deepEqual(sortKeyOf(docs[0], keys('{"items.k": -1, "items.n": 1}')), [2, "z"]);
  });
  test("one document, or none, is never sorted (no error for it)", () => {
    const one = [entry({ _id: "a", x: [1, 2], y: [1, 2, 3] })];
    assert.deepEqual(ids(sortDocuments(one, keys('{"x": 1, "y": 1}'))), ["a"]);
  });
  test("two regular expressions have no order: an error, as the bridge's 400", () => {
    const docs = [{ _id: "a", r: { $regexp: "a", $flags: "" } }, { _id: "b", r: { $regexp: "b", $flags: "" } }].map(entry);
    assert.throws(() => sortDocuments(docs, keys('{"r": 1}')), /cannot sort by r: regular expressions have no order/);
  });
  test("ties keep the order the documents arrived in, not their ids", () => {
    const docs = [{ _id: "c", n: 1 }, { _id: "a", n: 2 }, { _id: "b", n: 1 }, { _id: "d", n: 1 }];
    assert.deepEqual(sorted(docs, '{"n": 1}'), ["c", "b", "d", "a"]);
    assert.deepEqual(sorted(docs, '{"n": -1}'), ["a", "c", "b", "d"]);
    const reversed = [...docs].reverse();
    assert.deepEqual(sorted(reversed, '{"n": 1}'), ["d", "b", "c", "a"]);
  });
  test("Infinity against Infinity is unordered: a tie in arrival order, later keys not consulted", () => {
    const docs = [
      { _id: "x", n: { $InfNaN: 1 }, m: 2 },
      { _id: "y", n: 5, m: 0 },
      { _id: "z", n: { $InfNaN: 1 }, m: 1 },
      { _id: "w", n: { $InfNaN: -1 }, m: 9 },
      { _id: "v", n: { $InfNaN: -1 }, m: 0 },
    ];
    assert.deepEqual(sorted(docs, '{"n": 1, "m": 1}'), ["w", "v", "y", "x", "z"]);
    assert.deepEqual(sorted(docs, '{"n": -1, "m": 1}'), ["x", "z", "y", "w", "v"]);
    assert.ok(Number.isNaN(compareSortKeys(keys('{"n": 1, "m": 1}'), [{ $InfNaN: 1 }, 2], [{ $InfNaN: 1 }, 1])));
  });
  test("strings by UTF-16 code units", () => {
    const docs = [{ _id: "z-\u{1F600}" }, { _id: "z-\ue000" }, { _id: "\u00e9" }, { _id: "e\u0301" }, { _id: "E" }];
    assert.deepEqual(sorted(docs, '{"_id": 1}'), ["E", "e\u0301", "z-\u{1F600}", "z-\ue000", "\u00e9"]);
  });
  test("keys in the order written, each deciding in turn", () => {
    const docs = [{ _id: "a", n: 2, o: { p: "x" } }, { _id: "b", n: 1 }, { _id: "c", n: 2, o: { p: "a" } }, { _id: "d", n: "2" }];
    assert.deepEqual(sorted(docs, '{"n": -1, "o.p": 1}'), ["d", "c", "a", "b"]);
    assert.deepEqual(sorted(docs, '{"o.p": 1, "n": -1}'), ["d", "b", "c", "a"]);
  });
});

describe("pageOf", () => {
  const docs = Array.from({ length: 45 }, (_, i) => entry({ _id: `d${String(44 - i).padStart(2, "0")}`, n: i % 7 }));
  const sort = keys('{"n": 1}');

  test("skip and limit after the sort; the count is every match", () => {
    const second = pageOf(docs, { sort, limit: 10, page: 1 });
    assert.equal(second.count, 45);
    assert.equal(second.pages, 5);
    assert.equal(second.page, 1);
    assert.equal(second.error, null);
    assert.deepEqual(ids(second.rows), ids(sortDocuments(docs, sort).slice(10, 20)));
  });
  test("without a sort, the order given (arrival)", () => {
    assert.deepEqual(ids(pageOf(new Map(docs.map((d) => [d.key, d])).values(), { sort: [], limit: 3, page: 0 }).rows), ["d44", "d43", "d42"]);
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
    assert.deepEqual(pageOf([], { sort, limit: 10, page: 3 }), { rows: [], count: 0, page: 0, pages: 1, error: null });
  });
  test("a sort the documents refuse: no rows, the reason, the count", () => {
    const parallel = [entry({ _id: "a", x: [1, 2], y: [1, 2, 3] }), entry({ _id: "b" })];
    assert.deepEqual(pageOf(parallel, { sort: keys('{"x": 1, "y": -1}'), limit: 10, page: 2 }), {
      rows: [], count: 2, page: 0, pages: 1, error: "Sort: cannot sort by parallel arrays (x, y)",
    });
  });
});

test("the console sorts as Minimongo did: Tests/BridgeTests/Fixtures/minimongo-vectors.json", () => {
  // Queries with a sort whose matching documents are known: those of `{}` (every document),
  // and those of any other selector when there is no skip or limit (the answer is every match).
  // The documents arrive in file order, as they were inserted when the answers were recorded.
  const file = JSON.parse(readFileSync(new URL("../BridgeTests/Fixtures/minimongo-vectors.json", import.meta.url), "utf8"));
  const documents = file.documents.map(entry);
  const names = (selector) => typeof selector === "string" || (selector !== null && typeof selector === "object" && "_id" in selector);
  let compared = 0;
  let refused = 0;
  for (const [index, query] of file.queries.entries()) {
    if (!("sort" in query) || names(query.selector)) continue;
    const everything = query.selector !== null && typeof query.selector === "object" && Object.keys(query.selector).length === 0;
    if (!everything && ("skip" in query || "limit" in query || !("ids" in query.expect))) continue;
    const sort = parseSort(JSON.stringify(query.sort));
    assert.ok("keys" in sort, `query ${index}: ${JSON.stringify(query.sort)}`);
    const matches = everything ? documents : documents.filter((d) => query.expect.ids.includes(d.doc._id));
    /** @type {unknown} */
    let got;
    try {
      got = ids(sortDocuments(matches, sort.keys));
    } catch (error) {
      got = String(error);
    }
    if ("error" in query.expect) {
      // From {}, only the sort can throw ("cannot index parallel arrays"); a projection's error is not ours.
      if (!/parallel|regular/i.test(query.expect.error)) continue;
      refused++;
      assert.match(String(got), /SortError/, `query ${index}: Minimongo threw "${query.expect.error}"`);
      continue;
    }
    compared++;
    const skip = query.skip || 0;
    const page = Array.isArray(got) ? got.slice(skip, query.limit ? skip + query.limit : undefined) : got;
    assert.deepEqual(page, query.expect.ids, `query ${index}: ${JSON.stringify(query)}`);
  }
  assert.ok(compared > 1000, `only ${compared} queries compared`);
  assert.ok(refused > 0, "no sort refused");
});
