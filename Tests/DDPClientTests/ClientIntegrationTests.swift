import DDP
import DDPClient
import DDPServer
import FaultKit
import HTTPTypes
import HashTreeCollections
import Logging
import Testing

/// The client against the in-process server over real loopback WebSockets.
@Suite struct ClientIntegrationTests {
    @Test func methodsReturnResultsAndMeteorErrors() async throws {
        let server = try await startDemoServer()
        try await withClient(await server.url) { client, _ in
            let params: [EJSON] = [1, "two", ["three": [3]], nil, .date(1_700_000_000_000), .binary([0, 1, 2])]
            let value1 = try await client.call("echo", params: params)
            #expect(value1 == .array(params))
            await #expect(throws: DDPError.meteor("bad-thing", "it broke")) { try await client.call("boom") }
            await #expect(throws: DDPError.meteor(500, "Internal server error")) { try await client.call("crash") }
            await #expect(throws: DDPError.meteor(404, "Method 'nope' not found")) { try await client.call("nope") }
            await #expect(throws: DDPClientError.timedOut) { try await client.call("sleep", params: [2_000], timeout: .milliseconds(100)) }
            let value2 = try await client.call("echo", params: ["still fine"], until: .result)
            #expect(value2 == ["still fine"])
        }
        await server.stop()
    }

    @Test func subscriptionsFillTheCacheAndReportErrors() async throws {
        let server = try await startDemoServer()
        try await withClient(await server.url) { client, log in
            let sub = try await client.subscribe("tasks")
            let cached = await client.withCache {
                Dictionary(uniqueKeysWithValues: ($0.collections["tasks"]?.documents ?? [:]).map { ($0.key, $0.value) })
            }
            let published = try await server.core.publishedView("tasks")
            #expect(cached == published)
            #expect(cached.count == 3)
            await #expect(throws: DDPError.meteor("not-authorized", "This publication always fails")) { try await client.subscribe("failing") }
            await #expect(throws: DDPError.meteor(404, "Subscription 'nope' not found")) { try await client.subscribe("nope") }
            await client.unsubscribe(sub)
            try await log.waitFor("documents withdrawn") { await client.withCache { $0.documentCount } == 0 }
            #expect(log.documentChanges.filter { if case .removed = $0 { return true } else { return false } }.count == 3)
        }
        await server.stop()
    }

    @Test func overlappingSubscriptionsAreMerged() async throws {
        let server = try await startDemoServer()
        try await withClient(await server.url) { client, log in
            let all = try await client.subscribe("tasks")
            try await client.subscribe("tasks", params: [["listId": "inbox"]])
            #expect(log.documentChanges.count == 3, "the second subscription adds nothing new")
            log.clear()
            await client.unsubscribe(all)
            try await log.waitFor("task-a2 withdrawn") { await client.withCache { $0.document("tasks", "task-a2") } == nil }
            #expect(log.documentChanges.map(\.id) == ["task-a2"])
            #expect(await client.withCache { $0.collections["tasks"]?.documents.count } == 2)
        }
        await server.stop()
    }

    @Test func writesAreVisibleWhenTheCallReturns() async throws {
        let server = try await startDemoServer()
        try await withClient(await server.url) { client, _ in
            try await client.subscribe("tasks")
            let id = try await client.call(
                "/tasks/insert", params: [["text": "new task", "listId": "inbox", "done": false]],
                options: MethodOptions(randomSeed: "0123456789abcdef0123"))
            #expect(id == "devBuvC559TzDB3E9")
            #expect(await client.withCache { $0.document("tasks", "devBuvC559TzDB3E9") } == ["text": "new task", "listId": "inbox", "done": false])
            let value3 = try await client.call(
                "/tasks/update", params: [["_id": "devBuvC559TzDB3E9"], ["$set": ["done": true], "$unset": ["listId": 1]]])
            #expect(value3 == 1)
            #expect(await client.withCache { $0.document("tasks", "devBuvC559TzDB3E9") } == ["text": "new task", "done": true])
            await #expect(throws: DDPError.meteor(403, "Not permitted. Untrusted code may only update documents by ID.")) {
                try await client.call("/tasks/update", params: [["done": true], ["$set": ["done": false]]])
            }
            let value4 = try await client.call("/tasks/remove", params: [["_id": "devBuvC559TzDB3E9"]])
            #expect(value4 == 1)
            #expect(await client.withCache { $0.document("tasks", "devBuvC559TzDB3E9") } == nil)
        }
        await server.stop()
    }

    @Test func loginResumeLogoutAndSignUp() async throws {
        let server = try await startDemoServer()
        let token = try await withClient(await server.url) { client, log in
            await #expect(throws: DDPError.meteor(403, "Incorrect password")) {
                try await client.login(.password(user: .username("alice"), password: "wrong"))
            }
            await #expect(throws: DDPError.meteor(403, "User not found")) {
                try await client.login(.password(user: .email("nobody@example.com"), password: "secret"))
            }
            let login = try await client.login(.password(user: .email("alice@example.com"), password: "secret"))
            let value5 = try await client.call("whoami")
            #expect(value5 == .string(login.userId))
            #expect(log.all.contains(.loginChanged(login)))
            #expect((login.tokenExpires ?? 0) > 0)
            return login.token
        }
        try await withClient(await server.url) { client, _ in
            try await client.subscribe("myTasks")
            #expect(await client.withCache { $0.collections["tasks"] } == nil, "logged out: no tasks")
            let resumed = try await client.login(.resume(token: token))
            #expect(await client.withCache { $0.collections["tasks"]?.documents.keys.sorted() } == ["task-a1", "task-a2"])
            #expect(await client.withCache { $0.document("users", resumed.userId)?["username"] } == "alice")
            try await client.logout()
            let value6 = try await client.call("whoami")
            #expect(value6 == .some(.null))
            #expect(await client.withCache { $0.documentCount } == 0)
            await #expect(throws: DDPError.meteor(403, "You've been logged out by the server. Please log in again.")) {
                try await client.login(.resume(token: "bogus-token"))
            }
            let carol = try await client.createUser(username: "carol", email: "carol@example.com", password: "pw")
            let value7 = try await client.call("whoami")
            #expect(value7 == .string(carol.userId))
            await #expect(throws: DDPError.meteor(403, "Username already exists.")) {
                try await client.createUser(username: "carol", email: "carol2@example.com", password: "pw")
            }
        }
        await server.stop()
    }

    @Test func loginsAreRateLimitedPerConnection() async throws {
        let server = try await startDemoServer()
        try await withClient(await server.url) { client, _ in
            for _ in 0..<5 { _ = try? await client.login(.password(user: .username("alice"), password: "wrong")) }
            do {
                _ = try await client.login(.password(user: .username("alice"), password: "secret"))
                Issue.record("the sixth login within 10 s must be refused")
            } catch let error as DDPError {
                #expect(error.error == .string("too-many-requests"))
                #expect((error.details?["timeToReset"]?.numberValue ?? 0) > 0)
            }
        }
        await server.stop()
    }

    @Test func versionNegotiationFallsBackToTheServersChoice() async throws {
        let server = try await startDemoServer()
        try await withClient(await server.url, configure: { $0.protocolConfiguration.supportedVersions = ["2", "1"] }) { client, log in
            #expect(log.states.contains { if case .connected(_, "1") = $0 { return true } else { return false } })
            let value8 = try await client.call("echo", params: [1])
            #expect(value8 == [1])
        }
        await server.stop()
    }

    @Test func handshakeCarriesTheForwardedAddressAndCompressionWorks() async throws {
        let server = try await startDemoServer()
        try await withClient(
            await server.url,
            configure: {
                $0.handshakeHeaders[.init("X-Forwarded-For")!] = "203.0.113.7"
                $0.compression = true
            }
        ) { client, _ in
            let value9 = try await client.call("clientAddress")
            #expect(value9 == "203.0.113.7")
            let large = EJSON.string(String(repeating: "compressible ", count: 2_000))
            let value10 = try await client.call("echo", params: [large])
            #expect(value10 == [large])
        }
        await server.stop()
    }

    @Test func aGreetingWithoutMsgIsIgnored() async throws {
        let server = try await startDemoServer { $0.greetsWithServerID = true }
        try await withClient(await server.url) { client, log in
            let echoed = try await client.call("echo", params: ["hi"])
            #expect(echoed == ["hi"])
            #expect(!log.all.contains { if case .protocolError = $0 { return true } else { return false } })
        }
        await server.stop()
    }

    @Test func heartbeatsKeepAQuietConnectionUp() async throws {
        let server = try await startDemoServer {
            // Short intervals so pings flow both ways; timeouts with headroom for a loaded machine.
            $0.heartbeatInterval = .milliseconds(200)
            $0.heartbeatTimeout = .seconds(2)
        }
        try await withClient(
            await server.url,
            configure: {
                $0.protocolConfiguration.heartbeatInterval = .milliseconds(150)
                $0.protocolConfiguration.heartbeatTimeout = .seconds(2)
            }
        ) { client, log in
            // Real time must pass: the in-process server's heartbeat runs on the system clock, and
            // neither side reports a ping or a pong, so there is no event to wait for instead.
            try await Task.sleep(for: .milliseconds(1_200))
            #expect(await client.isConnected)
            #expect(!log.states.contains { if case .reconnecting = $0 { return true } else { return false } })
        }
        await server.stop()
    }
}
