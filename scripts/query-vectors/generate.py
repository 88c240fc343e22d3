#!/usr/bin/env python3
"""Generates the Minimongo differential-test vectors (Python 3.11, stdlib only).

    python3 scripts/query-vectors/generate.py --seed 46 --meteor DIR \
        [--queries 6000] [--out Tests/BridgeTests/Fixtures/minimongo-vectors.json]

DIR is a checkout of meteor/meteor (the vectors in the repository were recorded
at commit 024061123a49ff1d4b89d69453ec9263ef8599e1, Meteor 3.0.4, minimongo
2.0.1). Builds a corpus of EJSON documents and of queries (selector, sort,
skip, limit, fields) from the seed, asks Meteor's Minimongo for the answers
through minimongo-oracle.mjs (next to this file; needs node >= 20), and writes
the documents, the queries and the answers as one JSON file, one document or
query per line. The same seed and checkout give a byte-identical file.

The selectors use only the operators the bridge supports: $eq $ne $gt $gte
$lt $lte $in $nin $all $exists $size $not $elemMatch $type $mod $and $or $nor
$comment (no $regex, $where, $bits*, geo or text operators, no regular
expressions, no functions). Documents use plain field names only.
"""
import argparse
import collections
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DEFAULT_OUT = "Tests/BridgeTests/Fixtures/minimongo-vectors.json"
RECORDED_AT = "024061123a49ff1d4b89d69453ec9263ef8599e1"

# ----------------------------------------------------------------- values
# Values are kept in their EJSON JSON form throughout ({"$date": ms},
# {"$binary": b64}, {"$type": "oid", "$value": hex}, {"$InfNaN": 1/-1}).

INF = {"$InfNaN": 1}
NINF = {"$InfNaN": -1}
NUMS = [-1, 0, 0.5, 1, 2, 3, 5, 10, 1000000, -0.5, 1e21, INF, NINF]
NUM_W = [6, 8, 5, 10, 9, 8, 7, 5, 2, 3, 1, 1, 1]
STRS = ["a", "b", "c", "A", "B", "apple", "Apple", "APPLE", "banana", "red", "green",
        "x", "zeta", "", "10", "z", "Z",
        "\u00e9", "e\u0301", "A\u030a", "\u00c5", "\uffff", "\U0001F600"]
STR_W = [6, 6, 5, 3, 2, 4, 3, 1, 3, 4, 4, 3, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1]
TAGS = ["red", "green", "blue", "x", "a", "Red"]
KS = ["a", "b", "c", "B", "zeta", "\u00e9"]
DATES = [{"$date": 0}, {"$date": 1000000000000}, {"$date": 1700000000000},
         {"$date": -86400000}]
BINS = [{"$binary": ""}, {"$binary": "AQID"}, {"$binary": "AAE="}, {"$binary": "/w=="},
        {"$binary": "AQI="}]
OIDS = [{"$type": "oid", "$value": v} for v in
        ["5f1d7a3b2c4e6f8091a2b3c4", "000000000000000000000001", "ffffffffffffffffffffffff",
         "5f1d7a3b2c4e6f8091a2b3c5"]]
FIELDS = ["n", "s", "b", "d", "v", "mixed", "tags", "items", "meta", "arr"]

EJSON_KEYS = [{"$date"}, {"$binary"}, {"$InfNaN"}, {"$type", "$value"}, {"$escape"}]


def is_ejson_leaf(x):
    return isinstance(x, dict) and set(x) in EJSON_KEYS


def is_plain(x):
    return isinstance(x, dict) and not is_ejson_leaf(x)


def canon(x):
    return json.dumps(x, ensure_ascii=True, separators=(",", ":"))


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    # small helpers
    def p(self, prob):
        return self.r.random() < prob

    def pick(self, seq, weights=None):
        if weights is None:
            return seq[self.r.randrange(len(seq))]
        return self.r.choices(seq, weights=weights, k=1)[0]

    def wpick(self, table):
        """table: [(weight, value)]"""
        return self.r.choices([v for _, v in table], weights=[w for w, _ in table], k=1)[0]

    def num(self):
        return self.pick(NUMS, NUM_W)

    def small_num(self):
        return self.pick([0, 1, 2, 3, 5, -1, 0.5, 10])

    def string(self):
        return self.pick(STRS, STR_W)

    def scalar(self):
        return self.wpick([(30, self.num), (30, self.string), (8, lambda: self.pick([True, False])),
                           (8, lambda: None), (8, lambda: self.pick(DATES)),
                           (4, lambda: self.pick(BINS)), (4, lambda: self.pick(OIDS))])()

    def shuffled(self, d):
        items = list(d.items())
        self.r.shuffle(items)
        return dict(items)

    # ------------------------------------------------------------ documents
    def hand_written(self):
        return [
            {"items": [{"k": "b"}, {"k": "c"}]},
            {"items": []},
            {"items": [{}, {"q": [1, 1, 1]}]},
            {"mixed": [1000000, -1]},
            {"tags": [["x", "red"], "green"]},
            {"n": 0.5},
            {"meta": {"y": {}}},
            {"meta": [{"x": 2}, {"x": "zeta"}]},
            {"b": [1, 3]},
            {"s": "A\u030a"},
            {"s": "\u00c5"},
            {"s": "\uffff"},
            {"s": "\U0001F600"},
            {"s": "\u00e9"},
            {"s": "e\u0301"},
            {"s": "Apple", "n": 1},
            {"s": "apple", "n": 1},
            {"n": None, "v": None, "s": None},
            {},
            {"d": [{"$date": 1000000000000}, {"$date": 0}], "n": [2, 5], "s": ["b", "a"]},
        ]

    # n and d are never arrays in the random documents, s and b seldom: sorts on
    # two keys that both go into arrays throw "cannot index parallel arrays",
    # and sorts that pair an array path with one of these should mostly not.
    def f_n(self):
        return self.wpick([(82, self.num), (6, lambda: None), (4, lambda: self.pick(["10", "a", "1"])),
                           (3, lambda: self.pick([True, False])), (3, lambda: self.pick(DATES))])()

    def f_s(self):
        return self.wpick([(84, self.string), (1, lambda: [self.string() for _ in range(self.r.randint(1, 3))]),
                           (6, lambda: None), (5, self.num), (1, lambda: []),
                           (1, lambda: [[self.string()], self.string()])])()

    def f_b(self):
        return self.wpick([(64, lambda: self.pick([True, False])), (1, lambda: [1, 3]),
                           (1, lambda: [self.pick([True, False]) for _ in range(self.r.randint(1, 2))]),
                           (12, lambda: self.pick([0, 1])), (12, lambda: None), (5, lambda: "true")])()

    def f_d(self):
        return self.wpick([(55, lambda: self.pick(DATES)), (15, lambda: self.pick(BINS)),
                           (15, lambda: self.pick(OIDS)),
                           (6, lambda: None), (5, lambda: self.pick([0, 1000000000000]))])()

    def small_obj(self):
        return self.wpick([
            (3, lambda: {"x": 1, "y": 2}), (3, lambda: {"y": 2, "x": 1}), (2, lambda: {}),
            (2, lambda: {"x": self.small_num()}), (2, lambda: {"k": self.pick(KS)}),
            (1, lambda: {"x": {"y": 1}}), (1, lambda: {"x": [1, 2]}),
        ])()

    def f_v(self):
        return self.wpick([(60, self.scalar), (16, self.small_obj),
                           (8, lambda: [self.scalar() for _ in range(self.r.randint(0, 3))]),
                           (4, lambda: [self.small_obj(), self.scalar()])])()

    def mixed_elem(self, depth=0):
        t = [(40, self.scalar), (6, self.small_obj)]
        if depth < 2:
            t.append((10, lambda: [self.mixed_elem(depth + 1) for _ in range(self.r.randint(0, 2))]))
        return self.wpick(t)()

    def f_mixed(self):
        return self.wpick([(75, lambda: [self.mixed_elem() for _ in range(self.r.randint(0, 4))]),
                           (10, self.scalar), (5, lambda: []),
                           (5, lambda: [[self.num(), self.num()], [self.num()]]),
                           (5, lambda: [self.num(), self.string(), None])])()

    def f_tags(self):
        def tag_list():
            out = []
            for _ in range(self.r.randint(1, 3)):
                if self.p(0.12):
                    out.append([self.pick(TAGS) for _ in range(self.r.randint(1, 2))])
                else:
                    out.append(self.pick(TAGS))
            return out
        return self.wpick([(75, tag_list), (8, lambda: []), (8, lambda: self.pick(TAGS)),
                           (5, lambda: None), (4, lambda: [self.pick(TAGS), None])])()

    def item(self):
        def obj():
            d = {}
            if self.p(0.75):
                d["k"] = self.pick(KS) if self.p(0.9) else self.pick([None, 1, ["b", "c"]])
            if self.p(0.35):
                q = [self.small_num() for _ in range(self.r.randint(0, 3))]
                if self.p(0.2):
                    q.append([self.small_num(), self.small_num()])
                d["q"] = q
            if self.p(0.35):
                d["n"] = self.num()
            if self.p(0.1):
                d["list"] = [{"k": self.pick(KS)}]
            return self.shuffled(d)
        return self.wpick([(70, obj), (8, lambda: {}), (7, lambda: None), (7, self.scalar),
                           (4, lambda: [{"k": self.pick(KS)}]), (4, lambda: {"k": self.pick(KS), "q": [1, 1, 1]})])()

    def f_items(self):
        return self.wpick([(78, lambda: [self.item() for _ in range(self.r.randint(1, 4))]),
                           (7, lambda: []), (8, lambda: {"k": self.pick(KS)}),
                           (4, lambda: None), (3, lambda: [{"k": self.pick(KS)}, [{"k": "b"}, {}]])])()

    def f_meta(self):
        def obj():
            d = {}
            if self.p(0.6):
                d["x"] = self.num() if self.p(0.75) else self.string()
            if self.p(0.5):
                d["y"] = self.wpick([(5, lambda: {"z": self.small_num(), "w": self.pick(KS)}),
                                     (3, lambda: {"w": self.pick(KS), "z": self.small_num()}),
                                     (2, lambda: {}), (2, lambda: {"z": self.small_num()}),
                                     (2, lambda: [{"z": self.small_num()}, {"z": self.small_num()}]),
                                     (1, lambda: None)])()
            if self.p(0.4):
                d["list"] = [self.wpick([(8, lambda: {"k": self.pick(KS)}), (1, lambda: {}),
                                         (1, lambda: {"k": self.pick(KS), "n": self.small_num()}),
                                         (1, lambda: None)])()
                             for _ in range(self.r.randint(0, 3))]
            if self.p(0.3):
                d["z"] = [self.small_num() for _ in range(self.r.randint(0, 3))]
            return self.shuffled(d)
        return self.wpick([(70, obj), (8, lambda: {}),
                           (12, lambda: [{"x": self.num()} if self.p(0.8) else {"y": {}}
                                         for _ in range(self.r.randint(1, 3))]),
                           (5, lambda: None), (5, self.scalar)])()

    def f_arr(self):
        def nums():
            return [self.small_num() for _ in range(self.r.randint(1, 4))]
        return self.wpick([(65, nums), (10, lambda: []),
                           (10, lambda: [nums(), nums()] if self.p(0.5) else [nums(), self.small_num()]),
                           (10, self.small_num), (5, lambda: None)])()

    def random_doc(self):
        gens = {"n": (0.8, self.f_n), "s": (0.75, self.f_s), "b": (0.6, self.f_b), "d": (0.55, self.f_d),
                "v": (0.6, self.f_v), "mixed": (0.5, self.f_mixed), "tags": (0.65, self.f_tags),
                "items": (0.6, self.f_items), "meta": (0.6, self.f_meta), "arr": (0.55, self.f_arr)}
        doc = {}
        for f in FIELDS:
            prob, g = gens[f]
            if self.p(prob):
                doc[f] = g()
        return doc

    def documents(self, count):
        docs = self.hand_written()
        while len(docs) < count:
            docs.append(self.random_doc())
        return [dict([("_id", "d%03d" % (i + 1))] + list(d.items())) for i, d in enumerate(docs)]


# --------------------------------------------------------------- lookups
def lookup(v, parts):
    """Branch values reachable along parts (a rough version of Minimongo's
    lookup, only used to find operands that hit)."""
    if not parts:
        return [v]
    head, rest = parts[0], parts[1:]
    if isinstance(v, list):
        out = []
        if head.isdigit() and int(head) < len(v):
            out += lookup(v[int(head)], rest)
        for e in v:
            if is_plain(e):
                out += lookup(e, parts)
        return out
    if is_plain(v) and head in v:
        return lookup(v[head], rest)
    return []


def candidates(roots, path):
    """Per root (in order) the values found at path: each branch value and,
    for arrays, their elements."""
    out = []
    parts = path.split(".") if path else []
    for root in roots:
        vals = []
        for v in lookup(root, parts):
            vals += [v] + (v if isinstance(v, list) else [])
        out.append(vals)
    return out


def array_elements(roots, path):
    out, seen = [], set()
    for root in roots:
        for v in lookup(root, path.split(".")):
            if isinstance(v, list):
                for e in v:
                    c = canon(e)
                    if c not in seen:
                        seen.add(c)
                        out.append(e)
    return out


# ------------------------------------------------------------ selectors
TOP_PATHS = FIELDS
OBJ_PATHS = ["meta.x", "meta.y", "meta.y.z", "meta.y.w", "meta.list", "meta.z", "v.x", "v.k", "v.x.y"]
ARRAY_PATHS = ["items.k", "items.q", "items.n", "meta.list.k", "meta.y.z", "items.list.k", "mixed.x", "v.x"]
INDEX_PATHS = ["tags.0", "tags.1", "tags.0.1", "items.0", "items.1.k", "items.0.k", "items.0.q",
               "items.1.q.0", "items.q.1", "arr.0", "arr.1", "arr.0.0", "mixed.0", "mixed.1", "mixed.0.0",
               "n.0", "b.0", "b.1", "s.0", "meta.list.0.k", "meta.0.x", "meta.1.x", "meta.z.0", "d.0"]
MISSING_PATHS = ["nope", "meta.nope", "items.nope", "n.x", "s.length", "tags.5", "items.9.k", "zz.y"]
TYPE_CODES = [1, 2, 3, 4, 5, 7, 8, 9, 10, 16, 18, 19, -1, 127, 6, 11, 13]
TYPE_ALIASES = ["double", "string", "object", "array", "binData", "objectId", "bool", "date", "null",
                "int", "long", "decimal", "undefined", "regex", "minKey", "maxKey", "javascript"]
GENERIC = (NUMS + ["a", "b", "apple", "red", "x", "", "\u00c5", "A\u030a"] + [None, True, False] + DATES[:2] +
           BINS[:2] + OIDS[:2] + [[], [1, 3], ["x", "red"], [1, 1, 1], [1000000, -1], {}, {"x": 1, "y": 2},
                                  {"y": 2, "x": 1}, {"k": "b"}, {"z": 1, "w": "a"}, {"y": {}}, [{"k": "b"}, {"k": "c"}]])


class Ctx:
    def __init__(self, roots, paths, in_elem=False):
        self.roots = roots
        self.paths = paths          # [(weight, [path, ...])]
        self.in_elem = in_elem
        self.focus = None           # index of the root the clauses being made should match
        self._cand = {}

    def _values(self, path):
        if path not in self._cand:
            aligned = candidates(self.roots, path)
            self._cand[path] = (aligned, [vals for vals in aligned if vals])
        return self._cand[path]

    def cand(self, path):
        """The non-empty per-root value lists (picking a list and then a value
        favours the frequent values)."""
        return self._values(path)[1]

    def cand_at(self, path, index):
        return self._values(path)[0][index]


class QueryGen(Gen):
    def __init__(self, seed, docs):
        super().__init__(seed)
        self.docs = docs
        self.ids = [d["_id"] for d in docs]
        self.top = Ctx(docs, [(40, TOP_PATHS), (14, OBJ_PATHS), (20, ARRAY_PATHS), (18, INDEX_PATHS),
                              (3, MISSING_PATHS), (3, ["_id"])])
        self._elem_ctx = {}

    def path(self, ctx):
        path = self.pick(self.wpick([(w, ps) for w, ps in ctx.paths]))
        if ctx.focus is not None:
            for _ in range(8):  # prefer paths the focused root has
                if ctx.cand_at(path, ctx.focus):
                    break
                path = self.pick(self.wpick([(w, ps) for w, ps in ctx.paths]))
        return path

    def operand(self, ctx, path, kinds=None):
        """A value likely to be found at path (kinds: a filter)."""
        if ctx.focus is not None and self.p(0.92):
            vals = [v for v in ctx.cand_at(path, ctx.focus) if kinds is None or kinds(v)]
            if vals:
                return self.pick(vals)
        if self.p(0.9):
            per_root = ctx.cand(path)
            if kinds is not None:
                per_root = [f for f in ([v for v in vals if kinds(v)] for vals in per_root) if f]
            if per_root:
                return self.pick(self.pick(per_root))
        pool = GENERIC if kinds is None else [v for v in GENERIC if kinds(v)]
        return self.pick(pool)

    def has_arrays(self, ctx, path):
        return any(isinstance(v, list) for vals in ctx.cand(path) for v in vals)

    def comparable(self, v):
        return not isinstance(v, (list, dict)) or is_ejson_leaf(v)

    def value_list(self, ctx, path, lo, hi):
        return [self.operand(ctx, path) for _ in range(self.r.randint(lo, hi))]

    def type_of(self, v):
        """Minimongo's type code of an EJSON value (numbers are all 1)."""
        if isinstance(v, bool):
            return 8
        if isinstance(v, (int, float)) or v in (INF, NINF):
            return 1
        if isinstance(v, str):
            return 2
        if v is None:
            return 10
        if isinstance(v, list):
            return 4
        if "$date" in v:
            return 9
        if "$binary" in v:
            return 5
        if "$type" in v:
            return 7
        return 3

    def order_key(self, v):
        t = self.type_of(v)
        if t == 1:
            return float("inf") if v == INF else float("-inf") if v == NINF else float(v)
        if t == 2:
            return v.encode("utf-16-be")
        if t == 9:
            return v["$date"]
        return None

    def range_pair(self, ctx, path):
        a = self.operand(ctx, path, self.comparable)
        focus, ctx.focus = ctx.focus, None
        try:
            b = self.operand(ctx, path, self.comparable)
        finally:
            ctx.focus = focus
        ka, kb = self.order_key(a), self.order_key(b)
        if ka is not None and kb is not None and type(ka) is type(kb) and self.p(0.85):
            if ka > kb:
                a, b = b, a
            if focus is not None:  # keep the focused root's value inside
                return {"$gte": a, "$lte": b}
        return {self.pick(["$gt", "$gte"]): a, self.pick(["$lt", "$lte"]): b}

    def op_clause(self, ctx, path, depth, allow_elem=True):
        """One operator clause for path: a dict of operator -> operand."""
        kinds = [(6, "$eq"), (6, "$ne"), (16, "range"), (7, "$in"), (5, "$nin"), (5, "$all"),
                 (5, "$exists"), (5, "$size"), (5, "$not"), (5, "$type"), (4, "$mod")]
        if allow_elem and depth < 3:
            kinds.append((9 if self.has_arrays(ctx, path) else 1, "$elemMatch"))
        k = self.wpick(kinds)
        if k == "$eq" or k == "$ne":
            return {k: self.operand(ctx, path)}
        if k == "range":
            if self.p(0.25):
                if self.p(0.08):
                    return self.pick([{"$gte": 5, "$lte": -1}, {"$gt": 2, "$lt": 2}, {"$gte": "b", "$lte": "a"}])
                return self.range_pair(ctx, path)
            op = self.pick(["$gt", "$gte", "$lt", "$lte"])
            if self.p(0.1):
                return {op: self.pick([None, [1, 3], {"x": 1}, True, INF, NINF, {}])}
            return {op: self.operand(ctx, path, self.comparable)}
        if k == "$in" or k == "$nin":
            if self.p(0.01):
                return {k: self.operand(ctx, path)}  # usually not an array: an error
            vals = self.value_list(ctx, path, 0 if self.p(0.05) else 1, 4)
            if self.p(0.12):
                vals.append(None)
            return {k: vals}
        if k == "$all":
            if self.p(0.07):
                return {k: []}
            if self.p(0.01):
                return {k: [{"$gt": 1}]}
            per_root = ctx.cand(path)
            if ctx.focus is not None and ctx.cand_at(path, ctx.focus) and self.p(0.8):
                per_root = [ctx.cand_at(path, ctx.focus)]
            if per_root and self.p(0.85):
                vals = self.pick(per_root)
                return {k: [self.pick(vals) for _ in range(self.wpick([(6, 1), (4, 2), (1, 3)]))]}
            return {k: self.value_list(ctx, path, 1, 3)}
        if k == "$exists":
            return {k: self.wpick([(10, True), (10, False), (1, 1), (1, 0), (1, ""), (1, "yes")])}
        if k == "$size":
            arrays = [v for vals in ctx.cand(path) for v in vals if isinstance(v, list)]
            if ctx.focus is not None and self.p(0.8):
                arrays = [v for v in ctx.cand_at(path, ctx.focus) if isinstance(v, list)] or arrays
            if arrays and self.p(0.6):
                return {k: len(self.pick(arrays))}
            return {k: self.wpick([(5, 0), (8, 1), (7, 2), (5, 3), (2, 4), (1, "2"), (1, 1.5), (0.2, None)])}
        if k == "$not":
            if self.p(0.3):
                return {k: self.operand(ctx, path)}
            inner = self.op_clause(ctx, path, depth + 1)
            if "$not" in inner:
                inner = {"$gt": self.operand(ctx, path, self.comparable)}
            return {k: inner}
        if k == "$type":
            if self.p(0.03):
                return {k: self.pick([0, 20, "number", True, -2])}
            if self.p(0.8):
                code = self.type_of(self.operand(ctx, path))
                if self.p(0.5):
                    return {k: code}
                return {k: TYPE_ALIASES[TYPE_CODES.index(code)]}
            if self.p(0.5):
                return {k: self.pick(TYPE_CODES, [6, 6, 4, 5, 2, 2, 3, 3, 4, 2, 1, 1, 1, 1, 1, 1, 1])}
            return {k: self.pick(TYPE_ALIASES, [6, 6, 4, 5, 2, 2, 3, 3, 4, 2, 1, 1, 1, 1, 1, 1, 1])}
        if k == "$mod":
            if self.p(0.03):
                return {k: self.pick([[2], [2, 0, 1], ["2", 0], 2, [2, None]])}
            return {k: self.pick([[2, 0], [2, 1], [3, 0], [3, 1], [5, 0], [10, 0], [2, -1], [4, 0.5],
                                  [-2, 1], [0, 0], [1, 0], [0.5, 0]],
                                 [6, 6, 4, 3, 3, 2, 1, 1, 1, 1, 2, 1])}
        if k == "$elemMatch":
            return {k: self.elem_match(ctx, path, depth)}
        raise AssertionError(k)

    def elem_ctx(self, ctx, path):
        key = (id(ctx), path)
        if key not in self._elem_ctx:
            elems = array_elements(ctx.roots, path)
            objs = [e for e in elems if is_plain(e) or isinstance(e, list)]
            keys = []
            for e in objs:
                if is_plain(e):
                    for k in e:
                        if k not in keys:
                            keys.append(k)
            sub = []
            for k in keys:
                for e in objs:
                    if is_plain(e) and isinstance(e.get(k), (list, dict)) and not is_ejson_leaf(e.get(k)):
                        v = e[k]
                        subkeys = ["0", "1"] if isinstance(v, list) else list(v)[:3]
                        for s in subkeys:
                            if k + "." + s not in sub:
                                sub.append(k + "." + s)
            paths = [(10, keys or ["k", "x"]), (3, sub or ["0", "1"]), (1, ["0", "1", "zz"])]
            self._elem_ctx[key] = (Ctx(objs, paths, in_elem=True), Ctx(elems, [(1, [""])]), bool(keys))
        return self._elem_ctx[key]

    def elem_match(self, ctx, path, depth):
        doc_ctx, val_ctx, has_objs = self.elem_ctx(ctx, path)
        if self.p(0.01):
            return self.pick([5, "b", [1]])  # not an object: an error
        if has_objs and self.p(0.7) or self.p(0.12):
            if self.p(0.04):
                return {}
            if self.p(0.01):
                return {"diff": 1}
            return self.doc_selector(doc_ctx, depth + 1, max_fields=2)
        # operator form, on the array's elements
        clause = self.op_clause(val_ctx, "", depth + 1, allow_elem=depth < 2)
        if self.p(0.2):
            extra = self.op_clause(val_ctx, "", depth + 1, allow_elem=False)
            for k2, v2 in extra.items():
                clause.setdefault(k2, v2)
        return clause

    def value_selector(self, ctx, path, depth):
        if self.p(0.2):
            return self.operand(ctx, path)  # implicit equality
        clause = self.op_clause(ctx, path, depth)
        if self.p(0.08):  # combinations of operators on one field
            extra = self.op_clause(ctx, path, depth, allow_elem=False)
            for k, v in extra.items():
                clause.setdefault(k, v)
        return clause

    def logical(self, ctx, depth):
        op = self.wpick([(5, "$and"), (6, "$or"), (3, "$nor")])
        if self.p(0.006):
            return op, self.pick([[], {}, [5]])  # errors
        n = self.wpick([(3, 1), (6, 2), (3, 3)])
        focus = ctx.focus
        if op == "$and" and focus is None and ctx.roots and self.p(0.8):
            ctx.focus = self.r.randrange(len(ctx.roots))
        try:
            return op, [self.doc_selector(ctx, depth + 1, max_fields=2) for _ in range(n)]
        finally:
            ctx.focus = focus

    def doc_selector(self, ctx, depth, max_fields=3):
        focus = ctx.focus
        try:
            return self._doc_selector(ctx, depth, max_fields)
        finally:
            ctx.focus = focus

    def _doc_selector(self, ctx, depth, max_fields):
        sel = {}
        nfields = self.wpick([(14, 1), (4, 2), (1, 3)][:max_fields])
        if nfields > 1 and ctx.focus is None and ctx.roots and self.p(0.8):
            # several clauses: make them from one root so that some match
            ctx.focus = self.r.randrange(len(ctx.roots))
        if depth <= 3 and self.p(0.3 if ctx.in_elem else 0.15):
            nfields -= 1
            op, val = self.logical(ctx, depth)
            sel[op] = val
        for _ in range(nfields):
            path = self.path(ctx)
            if path in sel:
                continue
            sel[path] = self.value_selector(ctx, path, depth)
        if not sel:
            path = self.path(ctx)
            sel[path] = self.value_selector(ctx, path, depth)
        if not ctx.in_elem and self.p(0.04):
            sel["$comment"] = self.pick(["why", "", 1])
        # the logical clause sometimes comes after the field clauses
        if self.p(0.3):
            items = list(sel.items())
            self.r.shuffle(items)
            sel = dict(items)
        return sel

    def selector(self):
        t = self.r.random()
        if t < 0.015:
            return self.pick(self.ids + ["nope"])                 # bare id
        if t < 0.03:
            return {"_id": self.pick(self.ids + ["nope"])}
        if t < 0.045:
            return {"_id": {"$in": [self.pick(self.ids) for _ in range(0 if self.p(0.1) else self.r.randint(1, 6))]}}
        if t < 0.055:
            return self.pick([{"_id": {"$nin": self.r.sample(self.ids, 3)}}, {"_id": {"$gt": self.pick(self.ids)}},
                              {"_id": {"$ne": self.pick(self.ids)}}, {"_id": ""}, {"_id": None},
                              {"_id": self.pick(self.ids), "n": {"$exists": True}},
                              {"_id": {"$lte": self.pick(self.ids)}, "s": {"$type": 2}},
                              # Minimongo takes a key "diff" for an operator
                              {"meta": {"diff": 1}}, {"items": {"$elemMatch": {"diff": 1}}}])
        if t < 0.065:
            return {}
        if t < 0.068:
            return None
        if t < 0.14:
            op, val = self.logical(self.top, 1)
            return {op: val}
        return self.doc_selector(self.top, 1)

    # ---------------------------------------------------------- options
    SORT_PATHS = [(30, ["n", "s", "b", "d", "v", "_id"]), (12, ["tags", "arr", "mixed", "items", "meta"]),
                  (10, ["meta.x", "meta.y", "meta.y.z", "v.x"]),
                  (12, ["items.k", "items.n", "meta.list.k", "items.q", "meta.z"]),
                  (8, ["tags.0", "arr.0", "items.0.k", "items.1.k", "mixed.0", "meta.0.x", "arr.1", "n.0"]),
                  (3, ["nope", "meta.nope"])]
    SCALARISH = ["n", "s", "b", "d", "_id", "n", "s", "d"]

    def sort(self):
        if self.p(0.4):
            return None
        spec = {self.pick(self.wpick(self.SORT_PATHS)): self.pick([1, -1])}
        for _ in range(self.wpick([(12, 0), (6, 1), (2, 2)])):
            # further keys: mostly ones that are (nearly) never arrays
            path = self.pick(self.SCALARISH) if self.p(0.93) else self.pick(self.wpick(self.SORT_PATHS))
            if path not in spec:
                spec[path] = self.pick([1, -1])
        return spec

    PROJ_PATHS = [(30, ["n", "s", "b", "d", "v", "mixed", "tags", "items", "meta", "arr"]),
                  (12, ["meta.x", "meta.y", "meta.y.z", "meta.list", "v.x"]),
                  (12, ["items.k", "items.q", "meta.list.k", "items.n", "meta.x"]),
                  (6, ["items.0.k", "tags.0", "arr.1", "items.1", "meta.0.x", "mixed.0.0"]),
                  (3, ["nope", "meta.nope"])]

    def fields(self):
        t = self.r.random()
        if t < 0.04:   # invalid: mixed inclusion and exclusion
            a, b = self.r.sample(FIELDS, 2)
            return self.shuffled({a: self.pick([1, True]), b: self.pick([0, False])})
        if t < 0.065:  # invalid: overlapping paths and bad values
            return self.pick([{"meta": 1, "meta.x": 1}, {"items.k": 0, "items": 0}, {"meta.y": 1, "meta.y.z": 1},
                              {"_id": 1, "n": 0}, {"n": 2}, {"n": "1"}])
        if t < 0.17:   # _id variants
            a = self.pick(FIELDS)
            return self.pick([{"_id": 1}, {"_id": 0}, {"_id": False}, {"_id": 0, a: 1}, {a: 1, "_id": 0},
                              {"_id": 1, a: 1}, {"_id": True, a: True}, {"_id": 0, a: 0}, {}])
        including = self.p(0.6)
        spec = {}
        for _ in range(self.wpick([(5, 1), (4, 2), (2, 3)])):
            path = self.pick(self.wpick(self.PROJ_PATHS))
            if any(path == k or path.startswith(k + ".") or k.startswith(path + ".") for k in spec):
                continue
            spec[path] = self.pick([1, 1, True]) if including else self.pick([0, 0, False])
        if self.p(0.15):
            spec["_id"] = self.pick([0, False]) if self.p(0.7) else (1 if including else 0)
        return spec

    def query(self):
        q = {"selector": self.selector()}
        sort = self.sort()
        if sort is not None:
            q["sort"] = sort
        if self.p(0.25):
            q["skip"] = self.wpick([(3, 0), (6, self.r.randint(1, 5)), (3, self.r.randint(6, 30))])
        fields = self.fields() if self.p(0.3) else None
        if fields is not None:
            q["limit"] = self.r.randint(1, 10)
            q["fields"] = fields
        elif self.p(0.42):
            q["limit"] = self.wpick([(1, 0), (10, self.r.randint(1, 10)), (6, self.r.randint(11, 30))])
        return q

    def queries(self, count):
        out, seen = [], set()
        while len(out) < count:
            q = self.query()
            c = canon(q)
            if c in seen:
                continue
            seen.add(c)
            out.append(q)
        return out


# ------------------------------------------------------------ the oracle
def run_oracle(meteor, documents, queries):
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "in.json")
        out = os.path.join(tmp, "out.json")
        with open(inp, "w", encoding="utf-8") as f:
            json.dump({"documents": documents, "queries": queries}, f, ensure_ascii=True)
        subprocess.run(["node", str(HERE / "minimongo-oracle.mjs"), "--meteor", meteor, inp, "--out", out],
                       check=True)
        with open(out, encoding="utf-8") as f:
            result = json.load(f)
    if result["insertErrors"]:
        sys.exit("minimongo-oracle reported insert errors: %s" % json.dumps(result["insertErrors"]))
    if len(result["answers"]) != len(queries):
        sys.exit("minimongo-oracle answered %d of %d queries" % (len(result["answers"]), len(queries)))
    return result


# --------------------------------------------------------------- summary
def count_operators(sel, counts, where="doc"):
    """where: 'doc' (a document selector) or 'value' (a value selector)."""
    if isinstance(sel, list):
        for x in sel:
            count_operators(x, counts, where)
        return
    if not isinstance(sel, dict) or is_ejson_leaf(sel):
        if where == "value":
            counts["(implicit equality)"] += 1
        return
    if where == "doc":
        for k, v in sel.items():
            if k.startswith("$"):
                counts[k] += 1
                if k in ("$and", "$or", "$nor") and isinstance(v, list):
                    for s in v:
                        count_operators(s, counts, "doc")
            else:
                count_operators(v, counts, "value")
        return
    keys = list(sel)
    if not keys or not all(k.startswith("$") or k == "diff" for k in keys):
        counts["(implicit equality)"] += 1
        return
    for k, v in sel.items():
        counts[k] += 1
        if k == "$not":
            count_operators(v, counts, "value")
        elif k == "$elemMatch" and isinstance(v, dict):
            rest = [x for x in v if x not in ("$and", "$or", "$nor", "$comment")]
            if rest and all(x.startswith("$") or x == "diff" for x in rest):
                counts["$elemMatch (operator form)"] += 1
                count_operators(v, counts, "value")
            else:
                counts["$elemMatch (document form)"] += 1
                count_operators(v, counts, "doc")


def summary(queries, docs_total):
    ops = collections.Counter()
    for q in queries:
        count_operators(q["selector"], ops)
    print("queries: %d over %d documents" % (len(queries), docs_total))
    print("operator occurrences:")
    for k, v in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])):
        print("  %-28s %d" % (k, v))
    forms = collections.Counter()
    for q in queries:
        s = q["selector"]
        if s is None:
            forms["null"] += 1
        elif isinstance(s, str):
            forms["bare id string"] += 1
        elif s == {}:
            forms["{}"] += 1
        elif list(s) == ["_id"] and not isinstance(s["_id"], dict):
            forms["{_id: value}"] += 1
    print("selector forms:", dict(sorted(forms.items())))
    for k in ("sort", "skip", "limit", "fields"):
        print("with %-6s %d" % (k + ":", sum(1 for q in queries if k in q)))
    print("limit 0: %d" % sum(1 for q in queries if q.get("limit") == 0))
    errors = [q for q in queries if "error" in q["expect"]]
    print("error answers: %d (%.1f%%)" % (len(errors), 100.0 * len(errors) / len(queries)))
    msgs = collections.Counter(q["expect"]["error"] for q in errors)
    for m, c in msgs.most_common():
        print("  %4d  %s" % (c, m[:100]))
    sizes = [len(q["expect"]["ids"]) for q in queries if "ids" in q["expect"]]
    print("empty answers: %d" % sum(1 for s in sizes if s == 0))
    buckets = [(0, 0), (1, 1), (2, 5), (6, 10), (11, 30), (31, 100), (101, 200), (201, 10 ** 9)]
    print("answer sizes (ids):")
    for lo, hi in buckets:
        c = sum(1 for s in sizes if lo <= s <= hi)
        label = str(lo) if lo == hi else ("%d-%d" % (lo, hi) if hi < 10 ** 9 else "%d+" % lo)
        print("  %-8s %d" % (label, c))
    return ops


def match_stats(matches, docs_total):
    none = sum(1 for m in matches if m == 0)
    every = sum(1 for m in matches if m == docs_total)
    some = sum(1 for m in matches if m is not None and 0 < m < docs_total)
    print("selectors matching (before sort/skip/limit): none %d, some %d, all %d, error %d"
          % (none, some, every, sum(1 for m in matches if m is None)))


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--meteor", required=True, help="a meteor/meteor checkout")
    ap.add_argument("--queries", type=int, default=6000)
    ap.add_argument("--documents", type=int, default=300)
    ap.add_argument("--out", default=DEFAULT_OUT, help="relative to the repository root unless absolute")
    args = ap.parse_args()

    docs = Gen(args.seed).documents(args.documents)
    queries = QueryGen(args.seed + 1, docs).queries(args.queries)

    full = run_oracle(args.meteor, docs, queries)
    bare = run_oracle(args.meteor, docs, [{k: v for k, v in q.items() if k != "fields"} for q in queries])
    only = run_oracle(args.meteor, docs, [{"selector": q["selector"]} for q in queries])

    vectors = []
    for q, a, b in zip(queries, full["answers"], bare["answers"]):
        if "error" in a:
            expect = {"error": a["error"]}
        else:
            if "error" in b:
                sys.exit("query fails only without fields: %s" % canon(q))
            ids = [d["_id"] for d in b["documents"]]
            if len(ids) != len(a["documents"]):
                sys.exit("answers with and without fields differ in length: %s" % canon(q))
            for d, i in zip(a["documents"], ids):
                if "_id" in d and d["_id"] != i:
                    sys.exit("answers with and without fields differ in order: %s" % canon(q))
            expect = {"ids": ids}
            if "fields" in q:
                expect["documents"] = a["documents"]
            elif a["documents"] != b["documents"]:
                sys.exit("two runs of the same query differ: %s" % canon(q))
        v = {k: q[k] for k in ("selector", "sort", "skip", "limit", "fields") if k in q}
        v["expect"] = expect
        vectors.append(v)

    meteor = {k: full["meteor"][k] for k in ("commit", "minimongoVersion") if k in full["meteor"]}
    about = ("Differential-test vectors for the bridge's collection queries: each query's answer is what "
             "Meteor's Minimongo (LocalCollection.find(selector, {sort, skip, limit, fields}).fetch(), "
             "meteor/meteor at commit %s, minimongo %s) gave for these documents, inserted in this order. "
             "Recorded facts, not Minimongo's code. Made by scripts/query-vectors/generate.py --seed %d "
             "(documents and queries drawn from the seed; answers from scripts/query-vectors/"
             "minimongo-oracle.mjs under Node 20). The selector is always present (null means a null "
             "selector; a string is an _id); absent sort/skip/limit/fields were not passed. expect: "
             "{ids} in answer order, plus {documents} (the projected answer) when fields is given, or "
             "{error} (the exception's message) when find/fetch threw."
             % (meteor.get("commit", "?"), meteor.get("minimongoVersion", "?"), args.seed))

    def dump(x):
        return json.dumps(x, ensure_ascii=True, separators=(",", ":"))

    lines = ["{" + dump("about") + ":" + dump(about) + ",",
             dump("seed") + ":" + dump(args.seed) + ",",
             dump("meteor") + ":" + dump(meteor) + ",",
             dump("documents") + ":["]
    lines += [dump(d) + ("," if i < len(docs) - 1 else "") for i, d in enumerate(docs)]
    lines += ["],", dump("queries") + ":["]
    lines += [dump(v) + ("," if i < len(vectors) - 1 else "") for i, v in enumerate(vectors)]
    lines += ["]}"]
    text = "\n".join(lines) + "\n"
    json.loads(text)  # well-formed

    out = pathlib.Path(args.out)
    if not out.is_absolute():
        out = ROOT / out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")

    summary(vectors, len(docs))
    match_stats([None if "error" in a else len(a["documents"]) for a in only["answers"]], len(docs))
    print("wrote %s (%d bytes)" % (out, len(text.encode("utf-8"))))


if __name__ == "__main__":
    main()
