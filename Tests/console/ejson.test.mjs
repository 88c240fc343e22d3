// The EJSON order the console sorts by: Minimongo's, as the bridge's EJSON.minimongoCompare
// (Sources/DDP/Query/EJSON+Ordering.swift), and the values a sort path reaches, as the bridge's
// FieldPath.sortBranches (Sources/DDP/Query/FieldPath.swift).
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { NoOrderError, compareCodeUnits, compareStrings, compareValues, kindOf, memberOf, sortBranches } from "../../public/js/ejson.js";

describe("kindOf reads the typed forms as the bridge's parser does", () => {
  test("plain JSON", () => {
    assert.equal(kindOf(null), "null");
    assert.equal(kindOf(undefined), "null");
    assert.equal(kindOf(1.5), "number");
    assert.equal(kindOf("x"), "string");
    assert.equal(kindOf(true), "bool");
    assert.equal(kindOf([1]), "array");
    assert.equal(kindOf({ a: 1 }), "object");
  });
  test("typed objects, and objects that only look typed", () => {
    assert.equal(kindOf({ $date: 5 }), "date");
    assert.equal(kindOf({ $date: "5" }), "object"); // the bridge would refuse it; never sent
    assert.equal(kindOf({ $binary: "AQI=" }), "binary");
    assert.equal(kindOf({ $InfNaN: -1 }), "number");
    assert.equal(kindOf({ $type: "oid", $value: "0123456789abcdef01234567" }), "oid");
    assert.equal(kindOf({ $value: [1, 2], $type: "point" }), "custom");
    assert.equal(kindOf({ $regexp: "a.c", $flags: "i" }), "regexp");
    assert.equal(kindOf({ $escape: { $date: 5 } }), "object");
    assert.equal(kindOf({ $date: 5, other: 1 }), "object");
    assert.equal(kindOf({ $unknown: 1 }), "object");
  });
});

describe("compareValues: Minimongo's order", () => {
  test("type classes: null < numbers < strings < objects < arrays < binary < ObjectId < booleans < dates < regular expressions", () => {
    const ascending = [
      null, { $InfNaN: -1 }, -3, 0, 1.5, { $InfNaN: 1 }, "", "a", { a: 1 }, [1], { $binary: "AQI=" },
      { $type: "oid", $value: "0123456789abcdef01234567" }, false, true, { $date: -5 }, { $date: 5 }, { $regexp: "a", $flags: "" },
    ];
    for (let i = 0; i < ascending.length; i++) {
      for (let j = 0; j < ascending.length; j++) {
        if (i === j) continue; // ±Infinity against itself is unordered, a regular expression has no order
        const [a, b] = [ascending[i], ascending[j]];
        assert.equal(compareValues(a, b), Math.sign(i - j), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
      }
    }
  });
  test("a missing value comes before everything, null included", () => {
    assert.equal(compareValues(undefined, null), -1);
    assert.equal(compareValues(null, undefined), 1);
    assert.equal(compareValues(undefined, { $InfNaN: -1 }), -1);
    assert.equal(compareValues(undefined, undefined), 0);
    assert.equal(compareValues(null, null), 0);
  });
  test("numbers by subtraction: Infinity against Infinity, and NaN against anything, are unordered", () => {
    assert.ok(Number.isNaN(compareValues({ $InfNaN: 1 }, { $InfNaN: 1 })));
    assert.ok(Number.isNaN(compareValues({ $InfNaN: -1 }, { $InfNaN: -1 })));
    assert.ok(Number.isNaN(compareValues({ $InfNaN: 0 }, 5)));
    assert.ok(Number.isNaN(compareValues(5, { $InfNaN: 0 })));
    assert.equal(compareValues({ $InfNaN: 1 }, 1e308), 1);
    assert.equal(compareValues(0, -0), 0);
  });
  test("unordered inside an array or an object decides it unordered", () => {
    assert.ok(Number.isNaN(compareValues([{ $InfNaN: 1 }, 1], [{ $InfNaN: 1 }, 2])));
    assert.ok(Number.isNaN(compareValues({ a: { $InfNaN: 1 } }, { a: { $InfNaN: 1 } })));
    assert.equal(compareValues([0, { $InfNaN: 1 }], [1, { $InfNaN: 1 }]), -1, "an earlier element decides first");
  });
  test("strings by UTF-16 code units, as JavaScript's < (not Unicode scalars, not canonical equivalence)", () => {
    assert.equal(compareValues("X", "x"), -1);
    assert.equal(compareValues("abc", "ab"), 1);
    assert.equal(compareValues("z-\u{1F600}", "z-\ue000"), -1, "a surrogate pair comes before U+E000");
    assert.equal(compareValues("\u{1F600}", "\uffff"), -1);
    assert.equal(compareValues("\u00e9", "e\u0301"), 1, "canonically equivalent, different code units");
    assert.equal(compareValues("A\u030a", "\u00c5"), -1);
    assert.equal(compareValues("same", "same"), 0);
  });
  test("arrays element by element, then by length", () => {
    assert.equal(compareValues([1, 2], [1, 3]), -1);
    assert.equal(compareValues([1], [1, 0]), -1);
    assert.equal(compareValues([], []), 0);
    assert.equal(compareValues([2], [1, 5]), 1);
  });
  test("objects as [key, value, …] lists: keys by code units, then values, then size; key order counts", () => {
    assert.equal(compareValues({ a: 1 }, { b: 0 }), -1);
    assert.equal(compareValues({ a: 2 }, { a: 1, b: 0 }), 1);
    assert.equal(compareValues({ a: 1 }, { a: 1, b: 0 }), -1);
    assert.equal(compareValues({ x: 1, y: 2 }, { y: 2, x: 1 }), -1);
    assert.equal(compareValues({ $escape: { $date: "x" } }, { $date: "x" }), 0);
  });
  test("a custom type is an object {$type, $value} to it", () => {
    assert.equal(compareValues({ a: 1 }, { $type: "point", $value: [1, 2] }), 1, '"$type" < "a"');
    assert.equal(compareValues({ $value: [1, 3], $type: "point" }, { $type: "point", $value: [1, 2] }), 1, "whatever order it was written in");
    assert.equal(compareValues({ $type: "point", $value: [1, 2] }, { $type: "other", $value: [1, 3] }), 1);
    assert.equal(compareValues({ $escape: { $type: "p", $value: 1 } }, { $type: "p", $value: 1 }), 0);
  });
  test("binary: shorter first, then byte by byte", () => {
    assert.equal(compareValues({ $binary: "AQ==" }, { $binary: "AAA=" }), -1); // [1] < [0, 0]
    assert.equal(compareValues({ $binary: "AQI=" }, { $binary: "AQM=" }), -1);
    assert.equal(compareValues({ $binary: "AQI=" }, { $binary: "AQI=" }), 0);
  });
  test("ObjectIds by their hex, lowercased; dates; booleans", () => {
    assert.equal(compareValues({ $type: "oid", $value: "00000000000000000000000A" }, { $type: "oid", $value: "00000000000000000000000a" }), 0);
    assert.equal(compareValues({ $type: "oid", $value: "000000000000000000000001" }, { $type: "oid", $value: "00000000000000000000000a" }), -1);
    assert.equal(compareValues({ $date: 1 }, { $date: 2 }), -1);
    assert.equal(compareValues(false, true), -1);
  });
  test("two regular expressions have no order: the comparison throws", () => {
    assert.throws(() => compareValues({ $regexp: "a", $flags: "i" }, { $regexp: "a", $flags: "" }), NoOrderError);
    assert.throws(() => compareValues([{ $regexp: "a", $flags: "" }], [{ $regexp: "b", $flags: "" }]), NoOrderError);
    assert.equal(compareValues({ $regexp: "a", $flags: "" }, { $date: 0 }), 1, "against another type it has its place");
  });
});

describe("string orders", () => {
  test("compareCodeUnits: JavaScript's <", () => {
    assert.equal(compareCodeUnits("z-\u{1F600}", "z-\ue000"), -1);
    assert.equal(compareCodeUnits("\u00e9", "e\u0301"), 1);
    assert.equal(compareCodeUnits("a", "a"), 0);
  });
  test("compareStrings: Swift's String order (the collection list): scalars of the NFC form", () => {
    assert.equal(compareStrings("X", "x"), -1);
    assert.equal(compareStrings("\u00e9", "e\u0301"), 0);
    assert.equal(compareStrings("z-\u{1F600}", "z-\ue000"), 1);
  });
});

describe("memberOf finds a member as the bridge does", () => {
  test("by name, inside $escape, and by a canonically equivalent name (Swift's ==)", () => {
    assert.equal(memberOf({ a: 1 }, "a"), 1);
    assert.equal(memberOf({ a: 1 }, "b"), undefined);
    assert.deepEqual(memberOf({ $escape: { $date: { y: 2 } } }, "$date"), { y: 2 });
    assert.equal(memberOf({ "e\u0301": 3 }, "\u00e9"), 3);
    assert.equal(memberOf({ "\u212a": 4 }, "K"), 4, "KELVIN SIGN is K, canonically");
  });
});

describe("sortBranches: the values a sort path reaches, with their positions", () => {
  const values = (doc, path) => sortBranches(doc, path.split(".")).map((b) => [b.value, b.indices]);

  test("through objects: one value, or a missing one", () => {
    const doc = { a: { b: { c: 3 } }, when: { $date: 5 }, point: { $type: "p", $value: { x: 1 } } };
    assert.deepEqual(values(doc, "a.b.c"), [[3, null]]);
    assert.deepEqual(values(doc, "a.z"), [[undefined, null]]);
    assert.deepEqual(values(doc, "a.b.c.d"), [[undefined, null]]);
    assert.deepEqual(values(doc, "when.$date"), [[undefined, null]], "a date has no members");
    assert.deepEqual(values(doc, "point.x"), [[undefined, null]], "nor has a custom type");
    assert.deepEqual(values({ "": { "": 1 } }, "."), [[1, null]], "empty parts are keys");
  });
  test("an array is reached whole; the sort expands it (sortKeyOf)", () => {
    assert.deepEqual(values({ a: [1, 2] }, "a"), [[[1, 2], null]]);
  });
  test("across an array of objects: the rest of the path in each element that is an object", () => {
    const doc = { items: [{ k: "b" }, 7, { k: "c" }, { other: 1 }, [{ k: "z" }]] };
    assert.deepEqual(values(doc, "items.k"), [["b", [0]], ["c", [2]], [undefined, [3]]]);
    assert.deepEqual(values({ items: [] }, "items.k"), []);
  });
  test("a numeric part after an array is only an index", () => {
    const doc = { a: [{ 0: "key" }, { x: 1 }], b: [[1, 2], [3]] };
    assert.deepEqual(values(doc, "a.0"), [[{ 0: "key" }, [0, -1]]]);
    assert.deepEqual(values(doc, "a.1.x"), [[1, [1, -1]]]);
    assert.deepEqual(values(doc, "a.5"), [], "past the end: nothing");
    assert.deepEqual(values(doc, "a.5.x"), []);
    const found = sortBranches(doc, ["b", "0"]);
    assert.deepEqual(found.map((b) => [b.value, b.dontIterate]), [[[1, 2], true]], "an array found by an index is not expanded");
    assert.deepEqual(values({ a: [1, 2] }, "a.01"), [[undefined, [1, -1]]], "01 is no index JavaScript reads");
  });
  test("a numeric part of an object is a key", () => {
    assert.deepEqual(values({ a: { 0: "zero" } }, "a.0"), [["zero", null]]);
  });
});
