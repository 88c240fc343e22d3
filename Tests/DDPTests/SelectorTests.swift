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
        #expect(throws: SelectorError("a selector must be an object, not number")) { try Selector(3) }
    }
}

/// Matching takes a shortcut for paths that reach one value through objects; it must agree
/// with the general evaluation (every candidate a path reaches) on every selector and document.
@Suite struct SelectorShortcutTests {
    static func general(_ clause: Selector.Clause, _ document: EJSON) -> Bool {
        switch clause {
        case .and(let parts): return parts.allSatisfy { general($0, document) }
        case .or(let parts): return parts.contains { general($0, document) }
        case .nor(let parts): return !parts.contains { general($0, document) }
        case .field(let path, let test):
            var work = Selector.Work()
            return test.matches(Selector.candidates(document, path[...]), &work)
        }
    }

    @Test func theShortcutAgreesWithTheGeneralEvaluation() throws {
        let documents: [EJSON] = [
            ["a": 1, "b": ["c": 2, "d": [1, 2]], "e": nil, "s": "x"],
            ["a": [1, 2, 3], "b": [["c": 2], ["c": 3]], "s": ["x", "y"]],
            ["a": ["b": ["c": nil]], "b": "text", "e": 0],
            ["b": ["c": ["d": 4]], "a": 2.5],
            [:]
        ]
        let selectors = [
            #"{"a":1}"#, #"{"a":{"$ne":1}}"#, #"{"a":{"$in":[1,2]}}"#, #"{"a":{"$nin":[1,null]}}"#,
            #"{"a":{"$gt":1,"$lte":3}}"#, #"{"a":{"$exists":false}}"#, #"{"e":null}"#, #"{"e":{"$exists":true}}"#,
            #"{"b.c":2}"#, #"{"b.c":{"$ne":2}}"#, #"{"b.c.d":4}"#, #"{"b.d":{"$size":2}}"#, #"{"b.d":2}"#,
            #"{"a.b.c":null}"#, #"{"a.1":2}"#, #"{"s":{"$not":{"$in":["y"]}}}"#, #"{"s":{"$all":["x"]}}"#,
            #"{"b":{"$elemMatch":{"c":3}}}"#, #"{"$or":[{"a":2.5},{"b":"text"}],"e":{"$nin":[1]}}"#,
            #"{"$nor":[{"a":1}],"missing.deep":{"$exists":false}}"#, #"{"b.c":{"$gte":2,"$ne":3}}"#
        ]
        for text in selectors {
            let selector = try Selector(EJSONParser.parse(text))
            for document in documents {
                guard case .object(let object) = document else { continue }
                #expect(selector.matches(object) == Self.general(selector.clause, document), "\(text) on \(document)")
            }
        }
    }
}
