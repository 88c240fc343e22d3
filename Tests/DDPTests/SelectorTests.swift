import DDP
import Testing

@Suite struct SelectorTests {
    let doc: EJSONObject = [
        "_id": "a", "n": 5, "s": "hello", "tags": ["x", "y"], "done": false, "when": .date(100),
        "profile": ["name": "Ann", "age": 30], "items": [["k": 1], ["k": 2]],
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
