import DDP
import DDPClient
import HTTPTypes
import Testing

@testable import Bridge

/// The bridge's pure pieces, without sockets.
@Suite struct BridgeLogicTests {
    /// One decoder for query strings and path segments, in the server and in the fuzz target
    /// alike: a `%` takes exactly two hex digits (Swift's integer parser would take a sign).
    @Test func percentDecodingTakesOnlyHexDigits() {
        #expect(QueryString.decode("a%20b+c") == "a b c")
        #expect(QueryString.decode("%E2%9c%93") == "✓")
        #expect("tasks%2Fdone".percentDecoded == "tasks/done")
        for broken in ["%+1", "%-0", "%4", "%", "%g0", "%FF"] {
            #expect(QueryString.decode(broken[...]) == nil, "\(broken)")
        }
    }

    @Test func sharedSubscriptionsCountAndLinger() {
        var subs = SharedSubscriptions()
        var next = 0
        func newID() -> String {
            next += 1
            return "b\(next)"
        }
        let a = subs.acquire("tasks", [], newID: newID)
        let b = subs.acquire("tasks", [], newID: newID)
        let c = subs.acquire("tasks", [["listId": "inbox"]], newID: newID)
        #expect(a == ("b1", true) && b == ("b1", false) && c == ("b2", true))
        #expect(subs.entries["b1"]?.info.refs == 2)
        let t0 = ContinuousClock.now
        let r1 = subs.release("b1", at: t0 + .seconds(5))
        #expect(r1)
        let r2 = subs.takeExpired(now: t0 + .seconds(10))
        #expect(r2.isEmpty, "one reference is left")
        let r3 = subs.release("b1", at: t0 + .seconds(5))
        #expect(r3)
        #expect(subs.list.map(\.id) == ["b2"], "a released subscription is no longer listed")
        // Re-acquired within the linger: revived, not restarted.
        let r4 = subs.acquire("tasks", [], newID: newID)
        #expect(r4 == ("b1", false))
        let r5 = subs.takeExpired(now: t0 + .seconds(10))
        #expect(r5.isEmpty)
        let r6 = subs.releaseAll(named: "tasks", at: t0 + .seconds(1))
        #expect(r6 == 2)
        let r7 = subs.takeExpired(now: t0 + .seconds(2))
        #expect(r7.sorted() == ["b1", "b2"])
        #expect(subs.count == 0)
        let r8 = subs.release("b1", at: t0)
        #expect(!r8)
    }

    @Test func queriesSortSkipLimitAndProject() throws {
        var cache = DocumentCache()
        for (id, n, tag) in [("a", 3, "x"), ("b", 1, "y"), ("c", 2, "x"), ("~4", 2, "y")] {
            _ = cache.apply(.added(collection: "c", id: id, fields: ["n": .int(n), "tag": .string(tag), "deep": ["k": .int(n)]]))
        }
        let query = try DocumentQuery(
            selector: #"{"n":{"$gte":2}}"#, sort: #"{"n":-1,"tag":1}"#, skip: "1", limit: "2",
            fields: #"{"deep.k":1,"_id":1}"#, defaultLimit: 10, maxLimit: 100)
        let (documents, count) = try query.run(on: cache.collections["c"])
        #expect(count == 3)
        #expect(documents == [["_id": "c", "deep": ["k": 2]], ["_id": 4, "deep": ["k": 2]]], "by n, then tag; ~4 is the number 4")
        let excluding = try DocumentQuery(
            selector: nil, sort: #"[["n","asc"]]"#, skip: nil, limit: nil, fields: #"{"deep":0,"_id":0}"#,
            defaultLimit: 1, maxLimit: 100)
        #expect(try excluding.run(on: cache.collections["c"]).documents == [["n": 1, "tag": "y"]])
        #expect(throws: BridgeError.self) {
            try DocumentQuery(selector: nil, sort: nil, skip: nil, limit: "101", fields: nil, defaultLimit: 1, maxLimit: 100)
        }
        #expect(throws: BridgeError.self) {
            try DocumentQuery(selector: nil, sort: #"{"n":"up"}"#, skip: nil, limit: nil, fields: nil, defaultLimit: 1, maxLimit: 100)
        }
        #expect(throws: BridgeError.self) {
            try DocumentQuery(selector: nil, sort: nil, skip: nil, limit: nil, fields: #"{"n":2}"#, defaultLimit: 1, maxLimit: 100)
        }
        let empty = try DocumentQuery(selector: "", sort: "", skip: "", limit: "", fields: "", defaultLimit: 7, maxLimit: 100)
        #expect(empty.limit == 7, "empty parameters count as absent")
    }

    /// Without a sort: an ordered collection (`addedBefore`) in its own order, skip and limit
    /// counted in it; any other in the order its documents arrived, as Meteor's client keeps them.
    @Test func queriesWithoutASortFollowTheCollectionsOrderOrTheArrivals() throws {
        var cache = DocumentCache()
        _ = cache.apply(.addedBefore(collection: "list", id: "m", fields: ["n": 1], before: nil))
        _ = cache.apply(.addedBefore(collection: "list", id: "z", fields: ["n": 2], before: "m"))
        _ = cache.apply(.addedBefore(collection: "list", id: "a", fields: ["n": 3], before: nil))
        _ = cache.apply(.addedBefore(collection: "list", id: "k", fields: ["n": 4], before: "a"))
        let all = try DocumentQuery(selector: nil, sort: nil, skip: "1", limit: "2", fields: nil, defaultLimit: 10, maxLimit: 100)
        let (ordered, count) = try all.run(on: cache.collections["list"])
        #expect(count == 4)
        #expect(ordered.map { $0["_id"] } == ["m", "k"], "the order is z m k a: skip 1, take 2")
        for id in ["q", "b", "x", "c"] { _ = cache.apply(.added(collection: "plain", id: id, fields: ["n": 1])) }
        #expect(try all.run(on: cache.collections["plain"]).documents.map { $0["_id"] } == ["b", "x"], "q b x c: skip 1, take 2")
        _ = cache.apply(.removed(collection: "plain", id: "b"))
        _ = cache.apply(.added(collection: "plain", id: "b", fields: ["n": 2]))
        #expect(try all.run(on: cache.collections["plain"]).documents.map { $0["_id"] } == ["x", "c"], "q x c b: a document added again arrives anew")
    }

    @Test func rateLimiterSlidesItsWindow() {
        var limiter = RateLimiter<String>(calls: 2, interval: .seconds(10))
        let t0 = ContinuousClock.now
        let r9 = limiter.take("a", now: t0)
        #expect(r9 == nil)
        let r10 = limiter.take("a", now: t0 + .seconds(1))
        #expect(r10 == nil)
        let r11 = limiter.take("a", now: t0 + .seconds(2))
        #expect(r11 == .seconds(8))
        let r12 = limiter.take("b", now: t0 + .seconds(2))
        #expect(r12 == nil, "per key")
        let r13 = limiter.take("a", now: t0 + .seconds(10))
        #expect(r13 == nil, "the first call left the window")
    }

    @Test func meteorErrorsMapToStatuses() {
        #expect(BridgeError.from(DDPError.meteor(403, "no")).status == .forbidden)
        #expect(BridgeError.from(DDPError.meteor(409, "dup")).status == .conflict)
        #expect(BridgeError.from(DDPError.meteor(42, "odd")).status == .internalServerError)
        let limited = BridgeError.from(DDPError.meteor("too-many-requests", "slow", details: ["timeToReset": 2_500]))
        #expect(limited.status == .tooManyRequests && limited.retryAfter == 3)
        #expect(BridgeError.from(DDPError.meteor("not-authorized", "no")).status == .forbidden)
        #expect(BridgeError.from(DDPError.meteor("not-found", "no")).status == .notFound)
        #expect(BridgeError.from(DDPError.meteor("validation-error", "bad")).status == .badRequest)
        #expect(BridgeError.from(DDPClientErrorProbe.timeout).status == .gatewayTimeout)
        #expect(BridgeError.from(DDPError.meteor("x", "y")).body == ["error": "x", "reason": "y", "message": "y [x]", "details": nil])
    }
}

enum DDPClientErrorProbe {
    static let timeout: any Error = DDPClientError.timedOut
}
