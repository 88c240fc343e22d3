// The local copy kept from the event stream: documents applied one event at a time, a reset
// and its snapshot swapped in whole.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { LocalCopy, changedFields, keyOf } from "../../public/js/local-copy.js";

const added = (collection, id, fields) => ["added", { collection, id, fields }];
const changed = (collection, id, fields, cleared = []) => ["changed", { collection, id, fields, cleared, previous: {} }];
const removed = (collection, id) => ["removed", { collection, id, previous: {} }];
const docs = (copy, name) => [...copy.documents(name).values()].map((entry) => entry.doc);

describe("LocalCopy", () => {
  test("added, changed (set and cleared fields) and removed", () => {
    const copy = new LocalCopy();
    assert.deepEqual(copy.apply(...added("tasks", "a", { text: "one", done: false })), {
      type: "added", collection: "tasks", key: '"a"', fields: ["text", "done"],
    });
    assert.deepEqual(copy.apply(...changed("tasks", "a", { done: true, note: "new" }, ["text"])), {
      type: "changed", collection: "tasks", key: '"a"', fields: ["done", "note"],
    });
    assert.deepEqual(docs(copy, "tasks"), [{ _id: "a", done: true, note: "new" }]);
    assert.deepEqual(copy.apply(...removed("tasks", "a")), { type: "removed", collection: "tasks", key: '"a"', fields: [] });
    assert.deepEqual(docs(copy, "tasks"), []);
    assert.deepEqual(copy.counts(), [], "an empty collection is gone, as in the bridge's cache");
  });

  test("a changed field keeps its place; a new one comes last", () => {
    const copy = new LocalCopy();
    copy.apply(...added("c", "x", { a: 1, b: 2 }));
    copy.apply(...changed("c", "x", { c: 3, a: 9 }));
    assert.deepEqual(Object.keys(docs(copy, "c")[0]), ["_id", "a", "b", "c"]);
  });

  test("every change makes a new entry with a higher version (rows are redrawn by identity)", () => {
    const copy = new LocalCopy();
    copy.apply(...added("c", "x", { a: 1 }));
    const first = copy.documents("c").get('"x"');
    copy.apply(...changed("c", "x", { a: 2 }));
    const second = copy.documents("c").get('"x"');
    assert.notEqual(first, second);
    assert.equal(second.version, first.version + 1);
    assert.equal(first.doc.a, 1, "the old entry is left as it was");
  });

  test("ids of every EJSON kind: the row key is the id's JSON, the wire id is Meteor's", () => {
    const copy = new LocalCopy();
    const oid = { $type: "oid", $value: "0123456789abcdef01234567" };
    copy.apply(...added("c", oid, {}));
    copy.apply(...added("c", 5, {}));
    copy.apply(...added("c", "-x", {}));
    const entries = [...copy.documents("c").values()];
    assert.deepEqual(entries.map((e) => [e.key, e.wire]), [
      [JSON.stringify(oid), "0123456789abcdef01234567"], ["5", "~5"], ['"-x"', "--x"],
    ]);
    assert.equal(keyOf(oid), entries[0].key);
  });

  test("a change or removal of a document it does not hold", () => {
    const copy = new LocalCopy();
    assert.equal(copy.apply(...removed("c", "nobody")), null);
    assert.deepEqual(copy.apply(...changed("c", "late", { a: 1 })).type, "added");
    assert.deepEqual(docs(copy, "c"), [{ _id: "late", a: 1 }]);
  });

  test("reset: the snapshot fills a new copy, swapped in at the marker", () => {
    const copy = new LocalCopy();
    copy.apply(...added("tasks", "old", { n: 1 }));
    assert.deepEqual(copy.apply("reset", { reason: "A snapshot follows" }), { type: "reset" });
    assert.equal(copy.apply(...added("tasks", "new", { n: 2 })), null, "nothing to render before the marker");
    assert.deepEqual(docs(copy, "tasks"), [{ _id: "old", n: 1 }], "the old copy is shown until then");
    assert.deepEqual(copy.apply("snapshot", { count: 1 }), { type: "snapshot", count: 1 });
    assert.deepEqual(docs(copy, "tasks"), [{ _id: "new", n: 2 }]);
    assert.equal(copy.synced, true);
  });

  test("documents stay in the order they arrived in (the sort's tie order, as in the bridge)", () => {
    const copy = new LocalCopy();
    for (const id of ["c", "a", "b", "d"]) copy.apply(...added("t", id, { n: 1 }));
    copy.apply(...changed("t", "c", { n: 2 }));
    copy.apply(...added("t", "a", { n: 3 })); // an `added` for a document held replaces it where it is
    copy.apply(...removed("t", "b"));
    copy.apply(...added("t", "b", { n: 1 })); // removed and added again: it arrives anew
    copy.apply(...changed("t", "e", { n: 1 })); // a change for a document not held: it arrives
    assert.deepEqual(docs(copy, "t").map((doc) => doc._id), ["c", "a", "d", "b", "e"]);
    copy.apply("reset", {});
    for (const id of ["d", "c"]) copy.apply(...added("t", id, {}));
    copy.apply("snapshot", { count: 2 });
    assert.deepEqual(docs(copy, "t").map((doc) => doc._id), ["d", "c"], "a snapshot's documents in the order it lists them");
  });

  test("a second reset during a snapshot starts it again", () => {
    const copy = new LocalCopy();
    copy.apply("reset", {});
    copy.apply(...added("t", "half", {}));
    copy.apply("reset", {});
    copy.apply(...added("t", "whole", {}));
    copy.apply("snapshot", { count: 1 });
    assert.deepEqual(docs(copy, "t"), [{ _id: "whole" }]);
  });

  test("counts only: ids without fields, collections sorted by name", () => {
    const copy = new LocalCopy({ keepFields: false });
    copy.apply(...added("users", "u", { username: "alice" }));
    copy.apply(...added("tasks", "a", { text: "x" }));
    copy.apply(...added("tasks", "b", { text: "y" }));
    copy.apply(...added("Zebra", "z", {}));
    copy.apply(...changed("tasks", "a", { text: "z" }));
    assert.deepEqual(copy.counts(), [{ name: "Zebra", count: 1 }, { name: "tasks", count: 2 }, { name: "users", count: 1 }]);
    assert.deepEqual(docs(copy, "users"), [{ _id: "u" }]);
  });

  test("events that are not about documents are ignored", () => {
    const copy = new LocalCopy();
    assert.equal(copy.apply("ready", { subscriptions: ["s"] }), null);
    assert.equal(copy.apply("added", null), null);
    assert.equal(copy.version, 0);
  });
});

test("changedFields compares values, not identity", () => {
  assert.deepEqual(changedFields({ _id: 1, a: [1], b: { c: 2 }, d: 1 }, { _id: 1, a: [1], b: { c: 3 }, e: 0 }), ["b", "e"]);
});
