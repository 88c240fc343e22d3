// The EJSON order the console sorts by: MongoDB's type classes, then values, as the bridge's
// EJSON.compare (Sources/DDP/Selector/EJSON+Ordering.swift).
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { compareStrings, compareValues, kindOf, valueAt } from "../../public/js/ejson.js";

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

describe("compareValues", () => {
  test("orders type classes as MongoDB does", () => {
    const ascending = [
      null, -Infinity, -3, 0, 1.5, { $InfNaN: 1 }, "", "a", { a: 1 }, [1], { $binary: "AQI=" },
      { $type: "oid", $value: "0123456789abcdef01234567" }, false, true, { $date: -5 }, { $date: 5 }, { $regexp: "a", $flags: "" },
    ];
    for (let i = 0; i < ascending.length; i++) {
      for (let j = 0; j < ascending.length; j++) {
        const a = ascending[i] === -Infinity ? { $InfNaN: -1 } : ascending[i];
        const b = ascending[j] === -Infinity ? { $InfNaN: -1 } : ascending[j];
        assert.equal(compareValues(a, b), Math.sign(i - j), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
      }
    }
  });
  test("a missing value is null", () => {
    assert.equal(compareValues(undefined, null), 0);
    assert.equal(compareValues(undefined, 0), -1);
  });
  test("NaN equals every number, as Swift's < and > say", () => {
    assert.equal(compareValues({ $InfNaN: 0 }, 5), 0);
    assert.equal(compareValues(5, { $InfNaN: 0 }), 0);
  });
  test("arrays element by element, then by length", () => {
    assert.equal(compareValues([1, 2], [1, 3]), -1);
    assert.equal(compareValues([1], [1, 0]), -1);
    assert.equal(compareValues([], []), 0);
    assert.equal(compareValues([2], [1, 5]), 1);
  });
  test("objects member by member: names first, then values, then size", () => {
    assert.equal(compareValues({ a: 1 }, { b: 0 }), -1);
    assert.equal(compareValues({ a: 2 }, { a: 1, b: 0 }), 1);
    assert.equal(compareValues({ a: 1 }, { a: 1, b: 0 }), -1);
    assert.equal(compareValues({ $escape: { $date: "x" } }, { $date: "x" }), 0);
  });
  test("an object and a custom type share a class and have no order", () => {
    assert.equal(compareValues({ a: 1 }, { $type: "point", $value: [1, 2] }), 0);
    assert.equal(compareValues({ $type: "point", $value: [1, 2] }, { $type: "other", $value: [1, 3] }), -1);
  });
  test("binary: shorter first, then byte by byte", () => {
    assert.equal(compareValues({ $binary: "AQ==" }, { $binary: "AAA=" }), -1); // [1] < [0, 0]
    assert.equal(compareValues({ $binary: "AQI=" }, { $binary: "AQM=" }), -1);
    assert.equal(compareValues({ $binary: "AQI=" }, { $binary: "AQI=" }), 0);
  });
  test("dates, booleans and regular expressions", () => {
    assert.equal(compareValues({ $date: 1 }, { $date: 2 }), -1);
    assert.equal(compareValues(false, true), -1);
    assert.equal(compareValues({ $regexp: "a", $flags: "i" }, { $regexp: "a", $flags: "" }), 1);
    assert.equal(compareValues({ $regexp: "a", $flags: "z" }, { $regexp: "b", $flags: "" }), -1);
  });
});

describe("compareStrings follows Swift: Unicode scalars of the NFC form", () => {
  test("ASCII by code", () => {
    assert.equal(compareStrings("X", "x"), -1);
    assert.equal(compareStrings("abc", "ab"), 1);
    assert.equal(compareStrings("same", "same"), 0);
  });
  test("canonically equivalent strings are equal", () => {
    assert.equal(compareStrings("\u00e9", "e\u0301"), 0);
  });
  test("characters outside the BMP after U+E000 (UTF-16 code units would put them before)", () => {
    assert.equal(compareStrings("z-\u{1F600}", "z-\ue000"), 1);
    assert.ok("z-\u{1F600}" < "z-\ue000", "JavaScript's own < orders them the other way");
  });
});

describe("valueAt reads a dotted path as the bridge's sort does", () => {
  const doc = { _id: "d", a: { b: { c: 3 } }, list: [{ x: 1 }], when: { $date: 5 }, esc: { $escape: { $date: { y: 2 } } } };
  test("through objects", () => {
    assert.equal(valueAt(doc, ["a", "b", "c"]), 3);
    assert.deepEqual(valueAt(doc, ["a"]), { b: { c: 3 } });
    assert.equal(valueAt(doc, ["_id"]), "d");
  });
  test("missing, or through anything but an object, is null", () => {
    assert.equal(valueAt(doc, ["a", "z"]), null);
    assert.equal(valueAt(doc, ["list", "0", "x"]), null);
    assert.equal(valueAt(doc, ["when", "$date"]), null);
  });
  test("into an escaped object's members", () => {
    assert.deepEqual(valueAt(doc, ["esc", "$date"]), { y: 2 });
  });
});
