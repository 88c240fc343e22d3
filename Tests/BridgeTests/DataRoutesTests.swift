import Bridge
import DDP
import DDPClient
import DDPServer
import FaultKit
import HTTPTypes
import Testing

@Suite struct DataRoutesTests {
    @Test func methodsAnswerWithResultsOrMappedErrors() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            let echo = try await h.request(.post, "/v1/methods/echo", token: token, body: #"[1,"two",{"$date":1700000000000},{"$binary":"AAEC"}]"#)
            #expect(echo.status == .ok)
            #expect(echo.text == #"{"result":[1,"two",{"$date":1700000000000},{"$binary":"AAEC"}]}"#)
            #expect(try await h.request(.post, "/v1/methods/echo?wait=result", token: token, body: "[3]")["result"] == [3])
            // $escape inside $escape, through the bridge and the upstream and back, as Meteor reads
            // it (the bridge's parser kept the inner one literal and answered one level too deep).
            let escaped = try await h.request(.post, "/v1/methods/echo", token: token, body: #"[{"$escape":{"$escape":{"$escape":{}}}}]"#)
            #expect(escaped.text == #"{"result":[{"$escape":{"$escape":{}}}]}"#, "\(escaped.text)")
            #expect(try await h.request(.post, "/v1/methods/echo", token: token)["result"] == [], "an empty body means no params")
            expectError(try await h.request(.post, "/v1/methods/boom", token: token), .badRequest, "bad-thing")
            expectError(try await h.request(.post, "/v1/methods/crash", token: token), .internalServerError, 500)
            expectError(try await h.request(.post, "/v1/methods/nope", token: token), .notFound, 404)
            expectError(try await h.request(.post, "/v1/methods/echo", token: token, body: #"{"a":1}"#), .badRequest, "bad-request")
            expectError(try await h.request(.post, "/v1/methods/echo", token: token, body: #"[{"$date":"x"}]"#), .badRequest, "bad-request")
            expectError(
                try await h.request(.post, "/v1/methods/sleep?timeout=100", token: token, body: "[2000]"), .gatewayTimeout, "upstream-timeout")
            // The 504 names the limit that ran out.
            let timedOut = try await h.request(.post, "/v1/methods/sleep?timeout=100", token: token, body: "[2000]")
            #expect(timedOut["reason"]?.stringValue?.contains("within 100 ms (the request's timeout=100") == true, "\(timedOut.text)")
            #expect(timedOut["details"]?["timeout"] == 100)
            expectError(try await h.request(.post, "/v1/methods/echo?wait=maybe", token: token), .badRequest, "bad-request")
            expectError(try await h.request(.post, "/v1/methods/echo?timeout=-1", token: token), .badRequest, "bad-request")
            // Method names with slashes reach the upstream whole.
            expectError(try await h.request(.post, "/v1/methods/tasks/nothing", token: token), .notFound, 404)
        }
    }

    @Test func subscriptionsAreSharedCountedAndListed() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            let first = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
            #expect(first.status == .created)
            #expect(first["state"] == "ready" && first["refs"] == 1)
            let again = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks","params":[]}"#)
            #expect(again["id"] == first["id"] && again["refs"] == 2)
            let inbox = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks","params":[{"listId":"inbox"}]}"#)
            #expect(inbox["id"] != first["id"])
            #expect(try await h.request(.get, "/v1/subscriptions", token: token).json.arrayValue?.count == 2)
            let id = try #require(first["id"]?.stringValue)
            #expect(try await h.request(.delete, "/v1/subscriptions/\(id)", token: token).status == .noContent)
            #expect(try await h.request(.delete, "/v1/subscriptions/\(id)", token: token).status == .noContent)
            expectError(try await h.request(.delete, "/v1/subscriptions/\(id)", token: token), .notFound, "not-found")
            #expect(try await h.request(.delete, "/v1/subscriptions?name=tasks", token: token)["removed"] == 1)
            expectError(try await h.request(.delete, "/v1/subscriptions", token: token), .badRequest, "bad-request")
            // After the linger (200 ms) the documents are gone from the session.
            try await h.waitUntil("the documents gone after the linger", session: token) { $0.withCache { $0.documentCount } == 0 }
            #expect(try await h.request(.get, "/v1/collections", token: token).json == [])
            #expect(try await h.request(.get, "/v1/subscriptions", token: token).json == [])
        }
    }

    @Test func concurrentIdenticalSubscribesShareOneUpstreamSubscription() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            async let a = h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"bulk","params":[30]}"#)
            async let b = h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"bulk","params":[30]}"#)
            async let c = h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"nope"}"#)
            async let d = h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"nope"}"#)
            let (first, second, bad1, bad2) = try await (a, b, c, d)
            #expect(first.status == .created && second.status == .created)
            #expect(first["id"] == second["id"])
            #expect(first["state"] == "ready" && second["state"] == "ready")
            expectError(bad1, .notFound, 404)
            expectError(bad2, .notFound, 404)
            let list = try await h.request(.get, "/v1/subscriptions", token: token).json.arrayValue ?? []
            #expect(list.count == 1 && list.first?["refs"] == 2)
        }
    }

    @Test func subscriptionFailuresAndGroups() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            expectError(try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"failing"}"#), .forbidden, "not-authorized")
            expectError(try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"nope"}"#), .notFound, 404)
            expectError(try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"params":[]}"#), .badRequest, "bad-request")
            let group = try await h.request(.post, "/v1/subscriptions", token: token, body: #"[{"name":"tasks"},{"name":"typed"}]"#)
            #expect(group.status == .created)
            #expect(group.json.arrayValue?.map { $0["state"] } == ["ready", "ready"])
            let mixed = try await h.request(.post, "/v1/subscriptions", token: token, body: #"[{"name":"ticker","params":[1,1]},{"name":"nope"}]"#)
            expectError(mixed, .notFound, "subscription-failed")
            #expect(mixed["details"]?["subscriptions"]?.arrayValue?.map { $0["state"] } == ["ready", "error"])
            let pending = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"bulk","params":[10],"wait":false}"#)
            #expect(pending.status == .created && pending["state"] == "pending")
        }
    }

    @Test func collectionsAnswerMongoStyleQueries() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"[{"name":"tasks"},{"name":"bulk","params":[50]}]"#)
            #expect(try await h.request(.get, "/v1/collections", token: token).json == [["name": "bulk", "count": 50], ["name": "tasks", "count": 3]])
            let selector = urlEncoded(#"{"$or":[{"i":{"$lt":3}},{"i":{"$gte":48}}],"group":{"$ne":"g9"}}"#)
            let sort = urlEncoded(#"{"done":-1,"i":1}"#)
            let fields = urlEncoded(#"{"i":1,"_id":0}"#)
            let page = try await h.request(
                .get, "/v1/collections/bulk?selector=\(selector)&sort=\(sort)&fields=\(fields)&skip=1&limit=2", token: token)
            #expect(page.status == .ok)
            // Matches: i = 1, 2, 48, 50 (49 is in group g9); done (even) first, then by i: 2, 48, 50, 1.
            #expect(page.json == ["documents": [["i": 48], ["i": 50]], "count": 4])
            let inbox = try await h.request(
                .get, "/v1/collections/tasks?selector=\(urlEncoded(#"{"listId":"inbox"}"#))&sort=\(urlEncoded(#"[["text","desc"]]"#))", token: token)
            #expect(inbox["documents"]?.arrayValue?.map { $0["_id"] } == ["task-b1", "task-a1"])
            let one = try await h.request(.get, "/v1/collections/tasks/task-a2", token: token)
            #expect(one["_id"] == "task-a2" && one["listId"] == "work")
            guard case .date? = one["createdAt"] else {
                Issue.record("dates stay EJSON dates")
                return
            }
            expectError(try await h.request(.get, "/v1/collections/tasks/none", token: token), .notFound, "not-found")
            let empty = try await h.request(.get, "/v1/collections/empty", token: token)
            #expect(empty["documents"] == [] && empty["count"] == 0 && empty["collectionHeld"] == false)
            expectError(
                try await h.request(.get, "/v1/collections/bulk?selector=\(urlEncoded(#"{"i":{"$where":1}}"#))", token: token), .badRequest,
                "bad-request")
            expectError(try await h.request(.get, "/v1/collections/bulk?selector=notjson", token: token), .badRequest, "bad-request")
            expectError(try await h.request(.get, "/v1/collections/bulk?limit=-2", token: token), .badRequest, "bad-request")
            expectError(
                try await h.request(.get, "/v1/collections/bulk?sort=\(urlEncoded(#"{"i":"up"}"#))", token: token), .badRequest, "bad-request")
            expectError(
                try await h.request(.get, "/v1/collections/bulk?fields=\(urlEncoded(#"{"i":1,"group":0}"#))", token: token), .badRequest,
                "bad-request")
        }
    }

    /// An empty answer says whether it means anything: a collection no subscription of the
    /// session has sent a document of (a typo, or nothing subscribed yet) is answered with
    /// `"collectionHeld": false`, the collections held and a hint; a held one as before.
    @Test func anEmptyAnswerSaysWhetherTheSessionHoldsTheCollection() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            let early = try await h.request(.get, "/v1/collections/tasks", token: token)
            #expect(early.status == .ok && early["documents"] == [] && early["count"] == 0, "\(early.text)")
            #expect(early["collectionHeld"] == false && early["heldCollections"] == [], "\(early.text)")
            let subscribeFirst = try #require(early["hint"]?.stringValue)
            #expect(subscribeFirst.contains("subscribe") && subscribeFirst.contains("POST /v1/subscriptions"), "\(subscribeFirst)")
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"[{"name":"tasks"},{"name":"typed"}]"#)
            // A typo: the collections held, and the one most likely meant.
            let typo = try await h.request(.get, "/v1/collections/task", token: token)
            #expect(typo.status == .ok && typo["documents"] == [] && typo["count"] == 0, "\(typo.text)")
            #expect(typo["collectionHeld"] == false && typo["heldCollections"] == ["tasks", "typed"], "\(typo.text)")
            let meant = try #require(typo["hint"]?.stringValue)
            #expect(meant.contains("did you mean 'tasks'?") && meant.contains("GET /v1/collections"), "\(meant)")
            // Held: documents and no hint, and none when the selector matches nothing either.
            let held = try await h.request(.get, "/v1/collections/tasks", token: token)
            #expect(held["count"] == 3 && held.json.objectValue?.keys.sorted() == ["count", "documents"], "\(held.text)")
            let none = try await h.request(.get, "/v1/collections/tasks?selector=\(urlEncoded(#"{"listId":"nowhere"}"#))", token: token)
            #expect(none.json == ["documents": [], "count": 0], "an empty match of a held collection means no match: \(none.text)")
        }
    }

    /// A session subscribed to a publication that sends it nothing (after a logout, `myTasks` has
    /// nothing for an anonymous session) is not told to subscribe first: its hint names the
    /// subscriptions it holds.
    @Test func anEmptyAnswerAfterALogoutNamesTheSubscriptionsHeld() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"myTasks"}"#)
            #expect(try await h.request(.get, "/v1/collections/tasks", token: token)["count"] == 2)
            #expect(try await h.request(.post, "/v1/session/logout", token: token).status == .ok)
            try await h.waitUntil("alice's tasks gone", session: token) { $0.collection("tasks") == nil }
            let empty = try await h.request(.get, "/v1/collections/tasks", token: token)
            let hint = try #require(empty["hint"]?.stringValue, "\(empty.text)")
            #expect(hint.contains("(myTasks)") && !hint.contains("subscribe to a publication first"), "\(hint)")
        }
    }

    @Test func writesGoThroughCollectionMethodsAndAreReadable() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
            let inserted = try await h.request(
                .post, "/v1/collections/tasks", token: token, body: #"{"text":"from REST","listId":"inbox","done":false}"#)
            #expect(inserted.status == .created)
            let id = try #require(inserted["id"]?.stringValue)
            #expect(id.count == 17 && id.allSatisfy(MeteorRandom.unmistakableCharacters.contains))
            #expect(try await h.request(.get, "/v1/collections/tasks/\(id)", token: token)["text"] == "from REST", "read-your-writes")
            let withID = try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"_id":"mine","text":"chosen id"}"#)
            #expect(withID["id"] == "mine")
            expectError(try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"_id":"mine"}"#), .conflict, 409)

            #expect(try await h.request(.patch, "/v1/collections/tasks/\(id)", token: token, body: #"{"done":true}"#)["updated"] == 1)
            #expect(try await h.request(.get, "/v1/collections/tasks/\(id)", token: token)["done"] == true)
            #expect(
                try await h.request(.patch, "/v1/collections/tasks/\(id)", token: token, body: #"{"$unset":{"listId":1},"$inc":{"n":2}}"#)["updated"]
                    == 1)
            let after = try await h.request(.get, "/v1/collections/tasks/\(id)", token: token)
            #expect(after["listId"] == nil && after["n"] == 2)
            expectError(
                try await h.request(.patch, "/v1/collections/tasks/\(id)", token: token, body: #"{"$set":{"a":1},"b":2}"#), .badRequest, "bad-request"
            )
            expectError(try await h.request(.patch, "/v1/collections/tasks/\(id)", token: token, body: #"{"$bogus":{"a":1}}"#), .badRequest, 400)
            expectError(try await h.request(.patch, "/v1/collections/tasks/none", token: token, body: #"{"a":1}"#), .notFound, "not-found")

            #expect(try await h.request(.delete, "/v1/collections/tasks/\(id)", token: token)["removed"] == 1)
            expectError(try await h.request(.get, "/v1/collections/tasks/\(id)", token: token), .notFound, "not-found")
            expectError(try await h.request(.delete, "/v1/collections/tasks/\(id)", token: token), .notFound, "not-found")
        }
    }

    /// A document read once is answered from its encoded bytes until it changes: every read after
    /// a write (through the bridge, or by another client upstream) shows the write.
    @Test func aDocumentReadAgainShowsEveryChange() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            let (other, _) = try await h.session()
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
            let path = "/v1/collections/tasks/task-a1"
            for n in 1...5 {
                // Read twice: the second read is answered from the encoded bytes the first one kept.
                #expect(try await h.request(.get, path, token: token)["n"] == (n == 1 ? nil : .int(n - 1)))
                #expect(try await h.request(.get, path, token: token)["n"] == (n == 1 ? nil : .int(n - 1)))
                // The write comes from another session: this one learns of it only from upstream.
                _ = try await h.request(.patch, path, token: other, body: #"{"n":\#(n)}"#)
                try await h.waitUntil("the change reaches the session", session: token) {
                    $0.withCache { $0.document("tasks", "task-a1")?["n"] } == .int(n)
                }
                #expect(try await h.request(.get, path, token: token)["n"] == .int(n))
            }
            _ = try await h.request(.delete, path, token: token)
            expectError(try await h.request(.get, path, token: token), .notFound, "not-found")
        }
    }

    @Test func twoUsersNeverSeeEachOthersData() async throws {
        try await BridgeHarness.run { h in
            let (alice, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            let (bob, _) = try await h.session(#"{"username":"bob","password":"hunter2"}"#)
            let aliceSub = try await h.request(.post, "/v1/subscriptions", token: alice, body: #"{"name":"myTasks"}"#)
            _ = try await h.request(.post, "/v1/subscriptions", token: bob, body: #"{"name":"myTasks"}"#)
            let aliceTasks = try await h.request(.get, "/v1/collections/tasks", token: alice)["documents"]?.arrayValue?.compactMap {
                $0["_id"]?.stringValue
            }
            let bobTasks = try await h.request(.get, "/v1/collections/tasks", token: bob)["documents"]?.arrayValue?.compactMap {
                $0["_id"]?.stringValue
            }
            #expect(aliceTasks?.sorted() == ["task-a1", "task-a2"])
            #expect(bobTasks == ["task-b1"])
            expectError(try await h.request(.get, "/v1/collections/tasks/task-a1", token: bob), .notFound, "not-found")
            let id = try #require(aliceSub["id"]?.stringValue)
            expectError(try await h.request(.delete, "/v1/subscriptions/\(id)", token: bob), .notFound, "not-found")
            #expect(try await h.request(.get, "/v1/subscriptions", token: alice).json.arrayValue?.count == 1)
        }
    }

    @Test func badInputAndUnknownRoutesGetTheErrorShape() async throws {
        try await BridgeHarness.run(configure: { $0.maxBodySize = 64 }) { h in
            let (token, _) = try await h.session()
            expectError(
                try await h.request(.post, "/v1/methods/echo", token: token, body: "[" + String(repeating: "1,", count: 100) + "1]"),
                .contentTooLarge, "body-too-large")
            let wrongVerb = try await h.request(.put, "/v1/sessions")
            expectError(wrongVerb, .methodNotAllowed, "method-not-allowed")
            #expect(wrongVerb.headers[.allow] == "POST")
            // A verb no route knows (HTTP's new QUERY, WebDAV's) is answered as any other: 405
            // with Allow on a path that exists (it was 404), 404 on one that does not.
            for verb in ["QUERY", "PROPFIND"] {
                let method = try #require(HTTPRequest.Method(verb))
                let unknown = try await h.request(method, "/v1/sessions")
                expectError(unknown, .methodNotAllowed, "method-not-allowed")
                #expect(unknown.headers[.allow] == "POST")
                #expect(unknown["reason"]?.stringValue?.hasPrefix("\(verb) is not allowed here") == true, "\(unknown.text)")
                expectError(try await h.request(method, "/v1/nowhere"), .notFound, "not-found")
            }
            expectError(try await h.request(.get, "/v1/nowhere"), .notFound, "not-found")
            #expect(try await h.request(.get, "/healthz")["status"] == "ok")
        }
    }

    /// An attempt that reaches the upstream as it stops or starts can wait out its deadline (as
    /// in the client's reconnect tests): 2 s here, and the readiness check waits past it.
    @Test func upstreamDownGives503AndBackItWorksAgain() async throws {
        try await BridgeHarness.run(configure: {
            // Long enough for a loaded machine's first connection (a session is created within it).
            $0.connectTimeout = .milliseconds(2500)
            $0.ddp.connectTimeout = .seconds(2)
        }) { h in
            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"myTasks"}"#)
            let ready = try await h.readiness("ready") { $0.status == .ok }
            #expect(ready.status == .ok && ready["upstream"]?["state"] == "connected")
            let port = try #require(await h.upstream.port)
            await h.upstream.stop()
            let notReady = try await h.readiness("not ready") { $0.status != .ok }
            expectError(notReady, .serviceUnavailable, "upstream-unavailable")
            #expect(Int(notReady.headers[.retryAfter] ?? "") ?? 0 >= 1)
            try await h.waitUntil("the session's connection down", session: token) { !$0.isConnected }
            let down = try await h.request(.post, "/v1/methods/whoami", token: token)
            expectError(down, .serviceUnavailable, "upstream-unavailable")
            #expect(Int(down.headers[.retryAfter] ?? "") ?? 0 >= 1)
            #expect(try await h.request(.get, "/v1/session", token: token)["connection"]?["state"] != "connected")
            // Cached documents stay readable while the upstream is away, and say they may be stale.
            let upstreamState = try #require(HTTPField.Name("Upstream-State"))
            let stale = try await h.request(.get, "/v1/collections/tasks", token: token)
            #expect(stale["count"] == 2)
            let state = stale.headers[upstreamState]
            #expect(state == "reconnecting" || state == "connecting", "\(stale.headers)")
            #expect(stale["upstream"]?.stringValue == state)
            let tasks = try #require(stale["documents"]?.arrayValue?.first?["_id"]?.stringValue)
            #expect(try await h.request(.get, "/v1/collections/tasks/\(tasks)", token: token).headers[upstreamState] != nil)
            #expect(try await h.request(.get, "/v1/collections", token: token).headers[upstreamState] != nil)
            expectError(try await h.request(.post, "/v1/sessions", body: "{}"), .serviceUnavailable, "upstream-unavailable")
            try await h.upstream.start(port: port)
            try await h.waitUntilLive("the session's connection back", session: token)
            let whoami = try await h.request(.post, "/v1/methods/whoami", token: token)
            #expect(whoami.status == .ok)
            #expect(whoami["result"]?.stringValue?.count == 17, "the session resumed its login")
            let readyAgain = try await h.readiness("/readyz follows the upstream back") { $0.status == .ok }
            #expect(readyAgain.status == .ok, "/readyz follows the upstream back")
            let fresh = try await h.request(.get, "/v1/collections/tasks", token: token)
            #expect(fresh["count"] == 2 && fresh["upstream"] == nil && fresh.headers[upstreamState] == nil, "\(fresh.text)")
        }
    }
}
