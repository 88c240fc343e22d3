import Testing

@testable import DDP

@Suite struct SelectorTests {
    let doc: EJSONObject = [
        "_id": "a", "n": 5, "s": "hello", "tags": ["x", "y"], "done": false, "when": .date(100),
        "profile": ["name": "Ann", "age": 30], "items": [["k": 1], ["k": 2]]
    ]

    func matches(_ selector: EJSON) throws -> Bool { try Selector(selector).matches(doc) }

    @Test func operators() throws {
        #expect(try matches(["n": 5]))
        #expect(try !matches(["n": 6]))
        #expect(try matches(["tags": "x"]), "equality includes array membership")
        #expect(try matches(["tags": ["x", "y"]]))
        #expect(try matches(["n": ["$in": [1, 5]]]))
        #expect(try matches(["n": ["$nin": [1, 2]]]))
        #expect(try matches(["n": ["$gt": 4, "$lte": 5]]))
        #expect(try !matches(["n": ["$lt": 5]]))
        #expect(try !matches(["s": ["$gt": 4]]), "comparisons stay within a type")
        #expect(try matches(["when": ["$gte": .date(50)]]))
        #expect(try matches(["n": ["$ne": 4]]))
        #expect(try matches(["missing": ["$exists": false]]))
        #expect(try matches(["missing": nil]), "null matches a missing field")
        #expect(try matches(["profile.name": "Ann"]))
        #expect(try matches(["items.k": 2]), "dotted paths reach into arrays of objects")
        #expect(try matches(["$or": [["n": 1], ["s": "hello"]]]))
        #expect(try !matches(["$and": [["n": 5], ["s": "bye"]]]))
        #expect(try matches(["$nor": [["n": 1]]]))
        #expect(try matches(["tags": ["$size": 2], "items": ["$elemMatch": ["k": ["$gt": 1]]]]))
        #expect(try Selector("a").matches(doc))
    }

    @Test func invalidSelectorsSayWhy() {
        #expect(throws: SelectorError("unsupported operator $where")) { try Selector(["n": ["$where": 1]]) }
        #expect(throws: SelectorError("$in needs an array")) { try Selector(["n": ["$in": 1]]) }
        #expect(throws: SelectorError("$or needs a non-empty array of selectors")) { try Selector(["$or": []]) }
        #expect(throws: SelectorError("a selector must be an object or an id, not array")) { try Selector([1]) }
        #expect(throws: SelectorError("unknown operator $foo")) { try Selector(["n": ["$foo": 1]]) }
    }
}

/// A path that reaches one value through objects takes a shortcut; it must reach what the
/// general lookup reaches, on every path and document.
@Suite struct SelectorShortcutTests {
    @Test func theShortcutReachesWhatTheLookupReaches() throws {
        let documents: [EJSON] = [
            ["a": 1, "b": ["c": 2, "d": [1, 2]], "e": nil, "s": "x"],
            ["a": [1, 2, 3], "b": [["c": 2], ["c": 3]], "s": ["x", "y"]],
            ["a": ["b": ["c": nil]], "b": "text", "e": 0],
            ["b": ["c": ["d": 4]], "a": 2.5],
            ["a": ["b": [["c": 1], 5, ["c": [2]]]], "b": ["c": .custom(type: "oid", value: "0123456789abcdef01234567")]],
            [:]
        ]
        let paths = ["a", "b.c", "b.c.d", "b.d", "a.b.c", "a.1", "a.b.1.c", "missing.deep", "b.c.x", "e.f", "s.0", ""]
        for key in paths {
            let path = FieldPath(key)
            for document in documents {
                let general = path.lookUp(in: document).map { "\($0.value.map(\.description) ?? "missing") \($0.dontIterate)" }
                switch path.branches(in: document) {
                case .one(let value, let dontIterate):
                    #expect(general == ["\(value.map(\.description) ?? "missing") \(dontIterate)"], "\(key) on \(document)")
                case .many(let list):
                    #expect(general == list.map { "\($0.value.map(\.description) ?? "missing") \($0.dontIterate)" }, "\(key) on \(document)")
                }
            }
        }
    }
}
