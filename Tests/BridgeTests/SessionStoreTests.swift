import BridgeStore
import DDP
import DDPClient
import DDPServer
import FaultKit
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOHTTP1
import NIOPosix
import SQLiteNIO
import Testing
import Timing

@testable import Bridge

/// The session store: sealing, the record, the SQLite store itself, and sessions that survive a
/// restart of the bridge (two lives in front of one DDP server, through real HTTP).
@Suite struct SessionStoreTests {
    // MARK: - Pure parts

    @Test func sealedValuesOpenOnlyWithTheirKeyAndContext() throws {
        let key = SessionKey.random()
        let sealed = try #require(key.seal(Array("resume-token".utf8), context: Array("row a".utf8)))
        #expect(sealed.count == 1 + 12 + 12 + 16)
        #expect(key.open(sealed, context: Array("row a".utf8)).map { String(decoding: $0, as: UTF8.self) } == "resume-token")
        #expect(key.open(sealed, context: Array("row b".utf8)) == nil, "moved to another row")
        #expect(SessionKey.random().open(sealed, context: Array("row a".utf8)) == nil, "another key")
        var altered = sealed
        altered[20] ^= 1
        #expect(key.open(altered, context: Array("row a".utf8)) == nil, "altered")
        #expect(key.open(Array(sealed.prefix(20)), context: Array("row a".utf8)) == nil, "truncated")
        #expect(key.open([], context: []) == nil)
        #expect(key.seal(Array("x".utf8), context: []) != key.seal(Array("x".utf8), context: []), "a fresh nonce each time")
    }

    @Test func keysAreThirtyTwoBytesInHexOrBase64() {
        #expect(SessionKey(text: String(repeating: "ab", count: 32))?.bytes == [UInt8](repeating: 0xab, count: 32))
        #expect(SessionKey(text: Data(repeating: 7, count: 32).base64EncodedString())?.bytes == [UInt8](repeating: 7, count: 32))
        for bad in ["", "secret", String(repeating: "ab", count: 31), String(repeating: "zz", count: 32), Data(count: 16).base64EncodedString()] {
            #expect(SessionKey(text: bad) == nil, "\(bad)")
        }
        #expect(throws: Settings.Invalid.self) { try Settings(flags: ["upstream": "ws://x/websocket", "session-key": "short"], environment: [:]) }
        let settings = try? Settings(
            flags: ["upstream": "ws://x/websocket", "session-store": "postgres://u:p%40ss@db:5433/sessions?sslmode=disable"], environment: [:])
        #expect(
            settings?.configuration.sessionStore
                == .postgres(PostgresLocation(host: "db", port: 5433, username: "u", password: "p@ss", database: "sessions", sslMode: "disable")))
        #expect(settings?.configuration.sessionStore.description.contains("p@ss") == false, "no password in logs")
        for bad in ["mysql://u@db/x", "postgres://db/x", "postgres://u@/x", "postgres://u@db/x?sslmode=maybe", "postgres://u@db/x?user=v", "file"] {
            #expect(throws: Settings.Invalid.self, "\(bad)") {
                try Settings(flags: ["upstream": "ws://x/websocket", "session-store": bad], environment: [:])
            }
        }
    }

    @Test func storedSubscriptionsReadBackExactlyAndRefuseAnythingElse() {
        let subscriptions = [
            StoredSubscription(id: "b1", name: "tasks", params: [], refs: 2),
            StoredSubscription(id: "b2", name: "ticker", params: [1, ["a": .date(5)], .binary([1, 2])], refs: 1)
        ]
        let record = StoredSession(
            tokenHash: "h", version: 1, clientAddress: "a", userID: nil, sealedLogin: nil, bridgeLogin: false, subscriptions: subscriptions,
            expiresAt: 0, ended: nil, createdAt: 0)
        #expect(StoredSession.subscriptions(from: record.subscriptionsText) == subscriptions)
        for bad in ["", "{}", "[1]", #"[{"id":"b","name":"n","params":[],"refs":0}]"#, #"[{"id":1,"name":"n","params":[],"refs":1}]"#] {
            #expect(StoredSession.subscriptions(from: bad) == nil, "\(bad)")
        }
    }

    // MARK: - The SQLite store

    @Test func theSQLiteStoreKeepsTheNewestVersionAndEndsOnlyWhatIsDue() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try await SQLiteSessionStore.open(folder: folder, logger: Logger(label: "store"))
        var record = StoredSession(
            tokenHash: "h1", version: 2, clientAddress: "10.0.0.1", userID: "u1", sealedLogin: "c2VhbGVk", bridgeLogin: true,
            subscriptions: [StoredSubscription(id: "b1", name: "tasks", params: ["x"], refs: 3)], expiresAt: 5_000, ended: nil, createdAt: 42)
        try await store.save(record)
        #expect(try await store.load(tokenHash: "h1") == record)
        #expect(try await store.load(tokenHash: "h2") == nil)
        var older = record
        older.version = 1
        older.userID = "stale"
        try await store.save(older)
        #expect(try await store.load(tokenHash: "h1")?.userID == "u1", "an older save never overwrites a newer one")
        record.version = 3
        record.expiresAt = 9_000
        try await store.save(record)
        try await store.end(tokenHash: "h1", reason: "idle", onlyIfExpiredBy: 8_000, now: 8_000)
        #expect(try await store.load(tokenHash: "h1")?.ended == nil, "another replica kept it alive")
        try await store.end(tokenHash: "h1", reason: "closed by its client", onlyIfExpiredBy: nil, now: 8_000)
        let ended = try #require(try await store.load(tokenHash: "h1"))
        #expect(ended.ended == "closed by its client" && ended.sealedLogin == nil && ended.subscriptions.isEmpty)
        record.version = 4
        try await store.save(record)
        #expect(try await store.load(tokenHash: "h1")?.ended != nil, "an ended session is not revived by a late save")
        try await store.purge(before: 8_001)
        #expect(try await store.load(tokenHash: "h1") == nil)
        await store.shutdown()
    }

    // MARK: - Opening the store

    /// A store that only counts how often it was closed (and signals `changes` when it is).
    final class CountingStore: SessionStore {
        let closes: LockedState<Int>
        let changes: ChangeSignal?
        init(closes: LockedState<Int>, changes: ChangeSignal? = nil) {
            self.closes = closes
            self.changes = changes
        }
        func prepare() async throws {}
        func save(_ session: StoredSession) async throws {}
        func load(tokenHash: String) async throws -> StoredSession? { nil }
        func end(tokenHash: String, reason: String, onlyIfExpiredBy: Int64?, now: Int64) async throws {}
        func purge(before: Int64) async throws {}
        func shutdown() async {
            closes.withLock { $0 += 1 }
            changes?.signal()
        }
    }

    /// Waits `duration` whether or not the caller is cancelled: a store call that ignores
    /// cancellation and takes that long (the time it takes is what the test is about).
    static func sleepIgnoringCancellation(_ duration: Duration) async {
        await Task.detached { try? await Task.sleep(for: duration) }.value
    }

    /// Requests arriving while the store opens (the bridge's first requests after a start) wait
    /// for that one open: two opens racing each made a store, and the one dropped was never
    /// closed (sqlite-nio traps on that in debug builds; in release its file stayed open).
    /// A shutdown during an open closes the store the open makes.
    @Test func theStoreIsOpenedOnceHoweverManyRequestsNeedItAndClosedOnShutdown() async throws {
        let opens = LockedState(0)
        let closes = LockedState(0)
        let opening = ChangeSignal()
        /// A persistence whose every open takes `duration` and makes a ``CountingStore``.
        func counting(opening duration: Duration) -> SessionPersistence {
            SessionPersistence(
                name: "counting",
                opener: {
                    opens.withLock { $0 += 1 }
                    opening.signal()
                    await Self.sleepIgnoringCancellation(duration)
                    return CountingStore(closes: closes)
                }, key: .random(), logger: Logger(label: "store"), metrics: BridgeMetrics())
        }
        let persistence = counting(opening: .milliseconds(200))
        await withDiscardingTaskGroup { group in
            group.addTask { await persistence.start() }
            for n in 0..<8 { group.addTask { _ = await persistence.load(tokenHash: "h\(n)") } }
        }
        #expect(opens.withLock { $0 } == 1, "one open for every caller")
        await persistence.shutdown()
        #expect(closes.withLock { $0 } == 1)

        let late = counting(opening: .milliseconds(300))
        async let started: Void = late.start()
        try await opening.wait("the second open under way") { opens.withLock { $0 } == 2 }
        await late.shutdown()
        await started
        #expect(opens.withLock { $0 } == 2)
        #expect(closes.withLock { $0 } == 2, "the store opened during the shutdown is closed")
    }

    /// A value that comes after the deadline is handed to `discardLate` (the open that timed out
    /// closes its store), never dropped.
    @Test func aStoreOpenedAfterItsDeadlineIsClosed() async throws {
        let closes = LockedState(0)
        let closed = ChangeSignal()
        await #expect(throws: SessionStoreError.self) {
            try await SessionPersistence.withDeadline(
                "open", .milliseconds(100), on: MultiThreadedEventLoopGroup.singleton.any(), discardLate: { await $0.shutdown() }
            ) {
                await Self.sleepIgnoringCancellation(.milliseconds(300))
                return CountingStore(closes: closes, changes: closed)
            }
        }
        try await closed.wait("the late store closed", timeout: .seconds(5)) { closes.withLock { $0 } == 1 }
        let onTime = try await SessionPersistence.withDeadline(
            "open", .seconds(5), on: MultiThreadedEventLoopGroup.singleton.any(), discardLate: { await $0.shutdown() }
        ) {
            CountingStore(closes: closes)
        }
        #expect(closes.withLock { $0 } == 1, "a store that opened in time is the caller's")
        await onTime.shutdown()
    }

    // MARK: - Through the bridge

    static func temporaryFolder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ddp-bridge-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// One DDP server for every life of the bridge, as a Meteor app outlives a bridge restart.
    static func withUpstream(_ body: (LocalDDPServer, String) async throws -> Void) async throws {
        let upstream = LocalDDPServer(configuration: DemoDataSet.configuration, logger: Logger(label: "upstream"))
        try await DemoDataSet.seed(upstream.core)
        try await upstream.start()
        do {
            try await body(upstream, await upstream.url)
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    /// Another process's connection to the store file, to hold its locks: with a thread of its own
    /// (on the shared pool, two threads here, its COMMIT could wait behind the bridge's open, which
    /// waits for the holder's lock). Shut the pool down when done.
    static func fileHolder(_ folder: String) async throws -> (SQLiteConnection, NIOThreadPool) {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        do {
            let holder = try await SQLiteConnection.open(
                storage: .file(path: (folder as NSString).appendingPathComponent("sessions.sqlite")), threadPool: pool,
                logger: Logger(label: "holder"), on: MultiThreadedEventLoopGroup.singleton.any())
            return (holder, pool)
        } catch {
            try? await pool.shutdownGracefully()
            throw error
        }
    }

    static func storing(in folder: String, key: SessionKey) -> @Sendable (inout BridgeConfiguration) -> Void {
        { configuration in
            configuration.sessionStore = .sqlite
            configuration.dataDirectory = folder
            configuration.sessionKey = key
        }
    }

    /// A logged-in session with two references to one subscription and one to another, a stream
    /// that saw a change; after a restart the same token answers as if nothing happened (same
    /// user, subscriptions under the same ids and counts, the documents), and the stream resuming
    /// from its last id gets a reset and a snapshot (the new life's log never issued that id).
    @Test func aSessionSurvivesARestartOfTheBridge() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        try await Self.withUpstream { _, url in
            struct FirstLife: Sendable {
                var token = ""
                var user: EJSON?
                var subscriptions: EJSON?
                var lastEventID = ""
                var createdAt: EJSON?
            }
            let first = LockedState(FirstLife())
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                let (token, login) = try await h.session(#"{"username":"alice","password":"secret"}"#)
                for body in [#"{"name":"tasks"}"#, #"{"name":"tasks"}"#, #"{"name":"typed"}"#] {
                    #expect(try await h.request(.post, "/v1/subscriptions", token: token, body: body).status == .created)
                }
                let port = try #require(h.client.port)
                // A stream's own subscription lives as long as the stream.
                let last = try await withEventStream(port: port, "/v1/events?collections=tasks&subscribe=ticker&params=%5B1000%2C0%5D", token: token)
                {
                    stream in
                    try await stream.waitUntilOpen()
                    _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: token, body: #"{"n":1}"#)
                    try await stream.wait("a change") { PublicFanoutTests.documentEvents($0).count >= 1 }
                    return try #require(await stream.events.last?.id)
                }
                // The stream's own subscription goes when the bridge sees the hang-up (and, after
                // its linger, from the session's connection).
                try await h.waitUntil("the stream's subscription released", session: token) { connection in
                    !connection.subscriptions.values.contains { $0.name == "ticker" }
                }
                let session = try await h.request(.get, "/v1/session", token: token)
                first.withLock {
                    $0 = FirstLife(
                        token: token, user: login["userId"], subscriptions: session["subscriptions"], lastEventID: last,
                        createdAt: session["createdAt"])
                }
            }
            let was = first.withLock { $0 }
            #expect(was.subscriptions?.arrayValue?.count == 2)
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                #expect(h.registry.count == 0, "nothing held before the first request")
                let session = try await h.request(.get, "/v1/session", token: was.token)
                #expect(session.status == .ok, "\(session.text)")
                #expect(session["userId"] == was.user)
                #expect(session["subscriptions"] == was.subscriptions, "same ids, names, params, counts and state")
                #expect(session["createdAt"] == was.createdAt)
                let tasks = try await h.request(.get, "/v1/collections/tasks", token: was.token)
                #expect(tasks["documents"]?.arrayValue?.first { $0["_id"] == "task-a1" }?["n"] == 1)
                #expect(tasks["count"] == 3)
                let port = try #require(h.client.port)
                try await withEventStream(port: port, "/v1/events?collections=tasks", token: was.token, headers: [("Last-Event-ID", was.lastEventID)])
                {
                    stream in
                    try await stream.wait("reset and snapshot") { $0.contains { $0.event == "snapshot" } }
                    let events = await stream.events
                    #expect(events.first?.event == "reset", "resumed from \(was.lastEventID): \(events.prefix(3).map(\.event))")
                    #expect(PublicFanoutTests.documentEvents(events).count == 3)
                }
                // The subscription ids still work.
                let id = try #require(was.subscriptions?.arrayValue?.first?["id"]?.stringValue)
                #expect(try await h.request(.delete, "/v1/subscriptions/\(id)", token: was.token).status == .noContent)
                let metrics = try await h.request(.get, "/metrics")
                #expect(metricSample(metrics.text, "ddp_bridge_sessions_resumed_total") == 1)
                #expect(metricSample(metrics.text, "ddp_bridge_session_store_up") == 1)
                // A client that ends its session ends it for good: the next life says so.
                #expect(try await h.request(.delete, "/v1/session", token: was.token).status == .noContent)
            }
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                expectError(try await h.request(.get, "/v1/session", token: was.token), .unauthorized, "session-expired")
                expectError(
                    try await h.request(.get, "/v1/session", token: "ddpb_" + String(repeating: "x", count: 43)), .unauthorized, "invalid-session")
            }
        }
    }

    /// A store kept in memory by the test: what a program embedding the bridge would give it.
    final class GivenStore: SessionStore {
        let rows = LockedState([String: StoredSession]())
        let opens = LockedState(0)
        let closes = LockedState(0)
        func prepare() async throws {}
        func save(_ session: StoredSession) async throws { rows.withLock { $0[session.tokenHash] = session } }
        func load(tokenHash: String) async throws -> StoredSession? { rows.withLock { $0[tokenHash] } }
        func end(tokenHash: String, reason: String, onlyIfExpiredBy: Int64?, now: Int64) async throws {
            rows.withLock { $0[tokenHash] = nil }
        }
        func purge(before: Int64) async throws {}
        func shutdown() async { closes.withLock { $0 += 1 } }
    }

    /// The store is a parameter of the application (its runtime), not only a setting: a store
    /// given to two lives of the bridge, one after the other, keeps a session between them, in
    /// place of the store the configuration names (here none); each life opens it once and
    /// closes it.
    @Test func aStoreGivenToTheApplicationKeepsTheSessionsBetweenItsLives() async throws {
        let store = GivenStore()
        var runtime = BridgeRuntime()
        runtime.sessionStore = {
            store.opens.withLock { $0 += 1 }
            return store
        }
        let key = SessionKey.random()
        try await Self.withUpstream { _, url in
            let configure: @Sendable (inout BridgeConfiguration) -> Void = {
                // The settings name no store: only the given one can keep the session.
                $0.sessionStore = .memory
                $0.sessionKey = key
            }
            let first = LockedState(("", EJSON.null))
            try await BridgeHarness.run(upstreamURL: url, configure: configure, runtime: runtime) { h in
                let (token, login) = try await h.session(#"{"username":"alice","password":"secret"}"#)
                #expect(try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#).status == .created)
                let session = try await h.request(.get, "/v1/session", token: token)
                first.withLock { $0 = (token, session["subscriptions"] ?? .null) }
                #expect(login["userId"] != nil)
            }
            #expect(store.rows.withLock { $0.count } == 1, "the session was written to the given store")
            let (token, subscriptions) = first.withLock { $0 }
            try await BridgeHarness.run(upstreamURL: url, configure: configure, runtime: runtime) { h in
                let session = try await h.request(.get, "/v1/session", token: token)
                #expect(session.status == .ok, "\(session.text)")
                #expect(session["subscriptions"] == subscriptions)
                #expect(metricSample(try await h.request(.get, "/metrics").text, "ddp_bridge_sessions_resumed_total") == 1)
            }
        }
        #expect(store.opens.withLock { $0 } == 2)
        #expect(store.closes.withLock { $0 } == 2)
    }

    /// The first requests of a new life, all at once and while the store is still opening (another
    /// process holds the file's lock for a moment, as an old container still stopping would): each
    /// resumes its session, and the store is opened once (a log line per open). Opens racing each
    /// made a store, and the ones dropped were never closed (sqlite-nio traps on that in debug
    /// builds; in release the file stayed open).
    @Test func concurrentFirstRequestsAfterARestartShareOneOpenOfTheStore() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        try await Self.withUpstream { _, url in
            let tokens = LockedState<[String]>([])
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                for _ in 0..<4 {
                    let (token, _) = try await h.session()
                    tokens.withLock { $0.append(token) }
                }
            }
            let all = tokens.withLock { $0 }
            let (holder, pool) = try await Self.fileHolder(folder)
            defer { pool.shutdownGracefully { _ in } }
            _ = try await holder.query("PRAGMA locking_mode = EXCLUSIVE", [])
            _ = try await holder.query("BEGIN EXCLUSIVE", [])
            let (lines, logger) = LogLines.logger(level: .info)
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key), logger: logger) { h in
                async let statuses = withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for token in all + all { group.addTask { try await h.request(.get, "/v1/session", token: token).status } }
                    return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
                }
                // The requests are waiting for the store; let go of the file. A wait of time: nothing
                // says a request is waiting for the store (the registry's resumes are its own).
                try await Task.sleep(for: .milliseconds(400))
                _ = try await holder.query("COMMIT", [])
                try await holder.close()
                let answered = try await statuses
                #expect(answered.count == all.count * 2 && answered.allSatisfy { $0 == .ok }, "\(answered)")
            }
            let opens = lines.all.filter { $0.contains("session store open") }.count
            #expect(opens == 1, "the store was opened \(opens) times in one life: \(lines.all.joined())")
        }
    }

    /// A subscription an event stream holds for itself lives as long as the stream: a session
    /// saved while its stream is open keeps its own subscriptions, not the stream's. The bridge
    /// here cannot save at its stop (another process holds the file's write lock), so the next
    /// life resumes from the save made with the stream open — as after a crash.
    @Test func aSessionSavedWhileItsStreamIsOpenLeavesTheStreamsSubscriptionOut() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        try await Self.withUpstream { _, url in
            let kept = LockedState<(token: String, subscriptions: EJSON?)>(("", nil))
            let (holder, pool) = try await Self.fileHolder(folder)
            defer { pool.shutdownGracefully { _ in } }
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                let (token, _) = try await h.session()
                #expect(try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#).status == .created)
                let port = try #require(h.client.port)
                let stream = try await RawConnection.open(port: port)
                try await stream.send(
                    "GET /v1/events?subscribe=typed HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n")
                // The stream's head comes once its subscription is ready (held by the session).
                #expect(try await stream.waitUntilReceived("text/event-stream", count: 1, within: .seconds(10)) == 1)
                #expect(try await h.request(.get, "/v1/session", token: token)["subscriptions"]?.arrayValue?.count == 2)
                // Saved with the stream open.
                let bulk = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"bulk","params":[3]}"#)
                #expect(bulk.status == .created)
                let all = try await h.request(.get, "/v1/session", token: token)["subscriptions"]?.arrayValue ?? []
                #expect(all.count == 3)
                kept.withLock { $0 = (token, .array(all.filter { $0["name"] != "typed" })) }
                _ = try await holder.query("BEGIN IMMEDIATE", [])
            }
            _ = try await holder.query("ROLLBACK", [])
            try await holder.close()
            let was = kept.withLock { $0 }
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                let session = try await h.request(.get, "/v1/session", token: was.token)
                #expect(session.status == .ok, "\(session.text)")
                #expect(session["subscriptions"] == was.subscriptions, "the session's own subscriptions come back, not the stream's")
            }
        }
    }

    /// After a restart, a session whose Meteor login no longer holds (the user's tokens were revoked
    /// meanwhile) is 401 session-expired, not an anonymous session in the user's name; a bridge
    /// with another key cannot unseal the login, says so and leaves the session in the store.
    @Test func aSessionWhoseLoginNoLongerHoldsExpiresOnResume() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        try await Self.withUpstream { upstream, url in
            let tokens = LockedState<[String]>([])
            let user = LockedState<String>("")
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                let (a, login) = try await h.session(#"{"username":"alice","password":"secret"}"#)
                let (b, _) = try await h.session(#"{"username":"bob","password":"hunter2"}"#)
                tokens.withLock { $0 = [a, b] }
                user.withLock { $0 = login["userId"]?.stringValue ?? "" }
            }
            try await upstream.core.revokeLoginTokens(userId: user.withLock { $0 })
            let (alice, bob) = tokens.withLock { ($0[0], $0[1]) }
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                let refused = try await h.request(.get, "/v1/session", token: alice)
                expectError(refused, .unauthorized, "session-expired")
                #expect(refused["reason"]?.stringValue?.contains("no longer valid") == true, "\(refused.text)")
                #expect(try await h.request(.get, "/v1/session", token: bob)["userId"] != nil)
            }
            // A bridge with another key cannot unseal the login: it says so and leaves the session
            // alone (it ended it for good: a replica started with the wrong key ended every
            // session it was asked for); the bridges with the right key still serve it.
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: SessionKey.random())) { h in
                let mismatch = try await h.request(.get, "/v1/session", token: bob)
                expectError(mismatch, .serviceUnavailable, "session-key-mismatch")
                let metrics = try await h.request(.get, "/metrics").text
                #expect(metricSample(metrics, "ddp_bridge_session_key_mismatches_total") == 1, "\(metrics)")
            }
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                let served = try await h.request(.get, "/v1/session", token: bob)
                #expect(served["userId"] != nil, "\(served.text)")
            }
        }
    }

    /// A corrupt store file is not the users' problem: the bridge starts, sessions work in memory,
    /// the failure is logged and counted.
    @Test func aCorruptStoreDegradesToMemory() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let garbage = Data((0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
        try garbage.write(to: URL(fileURLWithPath: folder).appendingPathComponent("sessions.sqlite"))
        try await BridgeHarness.run(configure: Self.storing(in: folder, key: SessionKey.random())) { h in
            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            #expect(try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#).status == .created)
            #expect(try await h.request(.get, "/v1/collections/tasks", token: token)["count"] == 3)
            let metrics = try await h.request(.get, "/metrics").text
            #expect(metricSample(metrics, "ddp_bridge_session_store_errors_total{operation=\"open\"}") ?? 0 >= 1, "\(metrics)")
            #expect(metricSample(metrics, "ddp_bridge_session_store_up") == 0)
            // A token this bridge never issued: the store cannot be asked, so it cannot be vouched for.
            let unknown = try await h.request(.get, "/v1/session", token: "ddpb_" + String(repeating: "y", count: 43))
            expectError(unknown, .serviceUnavailable, "session-store-unavailable")
        }
    }

    /// The data folder and `sessions.sqlite` were made 0755/0644: user ids, client addresses and
    /// subscription params readable by anyone on the host. And a symbolic link in the file's
    /// place was followed.
    @Test func theStoreIsMadeForThisUserAloneAndALinkInItsPlaceIsRefused() async throws {
        let parent = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let folder = parent + "/data"
        try await BridgeHarness.run(configure: Self.storing(in: folder, key: SessionKey.random())) { h in
            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            #expect(try await h.request(.get, "/v1/session", token: token).status == .ok)
            let metrics = try await h.request(.get, "/metrics").text
            #expect(metricSample(metrics, "ddp_bridge_session_store_up") == 1)
        }
        let mode = { (path: String) in (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1 }
        #expect(try mode(folder) == 0o700)
        #expect(try mode(folder + "/sessions.sqlite") == 0o600)

        let linked = parent + "/linked"
        try FileManager.default.createDirectory(atPath: linked, withIntermediateDirectories: true)
        let target = parent + "/elsewhere.sqlite"
        #expect(FileManager.default.createFile(atPath: target, contents: nil))
        try FileManager.default.createSymbolicLink(atPath: linked + "/sessions.sqlite", withDestinationPath: target)
        try await BridgeHarness.run(configure: Self.storing(in: linked, key: SessionKey.random())) { h in
            _ = try await h.session()
            let metrics = try await h.request(.get, "/metrics").text
            #expect(metricSample(metrics, "ddp_bridge_session_store_errors_total{operation=\"open\"}") ?? 0 >= 1, "\(metrics)")
            #expect(metricSample(metrics, "ddp_bridge_session_store_up") == 0)
        }
        #expect(try FileManager.default.attributesOfItem(atPath: target)[.size] as? Int == 0, "nothing written through the link")
    }

    /// Every subscribe rewrote the whole session row before answering: 40 subscribes with 1 MiB
    /// params wrote 3.34 GB. Saves asked for while one is written now share the next write, so a
    /// burst of subscribes is a few writes, each answered only after a write that covers it.
    @Test func aBurstOfSubscribesIsAFewWritesOfTheSession() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        try await Self.withUpstream { upstream, url in
            let kept = LockedState<(String, Int)>(("", 0))
            let storing = Self.storing(in: folder, key: key)
            // The first write waits for the lock as long as the burst takes to arrive (seconds on a
            // loaded machine); with the 3 s default it could fail, and the burst go unsaved.
            let patient: @Sendable (inout BridgeConfiguration) -> Void = {
                storing(&$0)
                $0.storeTimeout = .seconds(60)
                // A request looks its held session up in the store every check interval: under the
                // held lock, that lookup waits, and so did the burst (on a loaded machine more than
                // 2 s passed between the session's creation and the burst).
                $0.storeCheckInterval = .seconds(3600)
            }
            try await BridgeHarness.run(upstreamURL: url, configure: patient) { h in
                let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
                let before = metricSample(try await h.request(.get, "/metrics").text, "ddp_bridge_session_store_saves_total") ?? 0
                let port = try #require(h.client.port)
                // Another process holds the file's write lock while the burst arrives, so the first
                // write waits and every other subscribe asks while it is under way.
                let (holder, pool) = try await Self.fileHolder(folder)
                defer { pool.shutdownGracefully { _ in } }
                _ = try await holder.query("BEGIN IMMEDIATE", [])
                // Each on a connection of its own, so they are concurrent (the harness's client is one connection).
                async let statuses = withThrowingTaskGroup(of: Int.self) { group in
                    for n in 0..<40 {
                        group.addTask {
                            try await requestOnOwnConnection(
                                port: port, .POST, "/v1/subscriptions", token: token, body: #"{"name":"tasks","params":[{"n":\#(n)}]}"#
                            ).status
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                do {
                    // (Seconds on a loaded machine: the burst's 40 connections, then the upstream's answers.)
                    try await upstream.core.wait("the 40 subscriptions made upstream", timeout: .seconds(30)) {
                        $0.subscriptionCount(named: "tasks") >= 40
                    }
                    // Ready in the session too: each request has its answer from upstream and goes on to save.
                    try await h.waitUntil("the 40 subscriptions ready in the session", session: token, timeout: .seconds(30)) { connection in
                        connection.subscriptions.values.filter { $0.name == "tasks" && $0.ready }.count == 40
                    }
                } catch {
                    // Let go of the file whatever happened: a connection dropped while open traps in
                    // sqlite-nio's debug builds, and that ended the whole test run.
                    _ = try? await holder.query("ROLLBACK", [])
                    try? await holder.close()
                    throw error
                }
                let listed = try await h.request(.get, "/v1/subscriptions", token: token).json
                #expect(listed.arrayValue?.filter { $0["state"]?.stringValue == "ready" }.count == 40)
                _ = try await holder.query("COMMIT", [])
                try await holder.close()
                let answered = try await statuses
                #expect(answered.count == 40 && answered.allSatisfy { $0 == 201 }, "\(answered)")
                let after = metricSample(try await h.request(.get, "/metrics").text, "ddp_bridge_session_store_saves_total") ?? 0
                // A few writes (two when every save asks while the first waits); under load some
                // subscribes ask after a write has begun and take the next one. Each save alone: 40.
                #expect(after - before >= 1 && after - before <= 20, "\(after - before) writes for 40 subscribes")
                kept.withLock { $0 = (token, 40) }
            }
            // Every subscription answered was in a write: the next life has them all.
            let (token, count) = kept.withLock { $0 }
            try await BridgeHarness.run(upstreamURL: url, configure: Self.storing(in: folder, key: key)) { h in
                let session = try await h.request(.get, "/v1/session", token: token)
                #expect(session["subscriptions"]?.arrayValue?.count == count, "\(session.text.prefix(300))")
            }
        }
    }

    /// A subscribe while the store failed (another process held its lock past `--store-timeout`)
    /// was kept in memory only, and the store was left alone for a few seconds after; a bridge
    /// stopping within those seconds skipped its last saves, so the next life resumed the session
    /// without the subscription. The last saves now try the store again.
    @Test func aSessionChangedWhileTheStoreFailedIsSavedWhenTheBridgeStops() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        let storing = Self.storing(in: folder, key: key)
        try await Self.withUpstream { _, url in
            let kept = LockedState("")
            try await BridgeHarness.run(
                upstreamURL: url,
                configure: {
                    storing(&$0)
                    $0.storeTimeout = .milliseconds(300)
                    $0.subscriptionLinger = .seconds(10)  // a sweep a second, not one per 100 ms
                }
            ) { h in
                let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
                // The hourly purge is done before the lock is taken: one that succeeded after it
                // was let go would say the store answers again, and hide what this test is about.
                await h.registry.sweepOnce()
                let errorsBefore =
                    metricSample(try await h.request(.get, "/metrics").text, #"ddp_bridge_session_store_errors_total{operation="save"}"#) ?? 0
                let (holder, pool) = try await Self.fileHolder(folder)
                defer { pool.shutdownGracefully { _ in } }
                _ = try await holder.query("BEGIN IMMEDIATE", [])
                let created = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
                #expect(created.status == .created, "the store failing is not the client's error")
                _ = try await holder.query("COMMIT", [])
                try await holder.close()
                let errorsAfter =
                    metricSample(try await h.request(.get, "/metrics").text, #"ddp_bridge_session_store_errors_total{operation="save"}"#) ?? 0
                #expect(errorsAfter > errorsBefore, "the save failed while the lock was held")
                kept.withLock { $0 = token }
            }
            let token = kept.withLock { $0 }
            try await BridgeHarness.run(upstreamURL: url, configure: storing) { h in
                let session = try await h.request(.get, "/v1/session", token: token)
                #expect(session.status == .ok)
                #expect(session["subscriptions"]?.arrayValue?.count == 1, "\(session.text.prefix(300))")
            }
        }
    }

    /// Two bridges on one store: a session ended on one (its client's `DELETE`) lived on in the
    /// other. A held stored session is looked up again (`--store-check-interval`) and ends there too.
    @Test func aSessionEndedOnOneReplicaEndsOnTheOther() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        let storing = Self.storing(in: folder, key: key)
        let time = BridgeClock.driven()
        try await Self.withUpstream { _, url in
            try await BridgeHarness.run(upstreamURL: url, configure: { storing(&$0) }) { a in
                try await BridgeHarness.run(
                    upstreamURL: url,
                    configure: {
                        storing(&$0)
                        $0.storeCheckInterval = .milliseconds(100)
                    },
                    runtime: BridgeRuntime(clock: time)
                ) { b in
                    let (token, _) = try await a.session(#"{"username":"alice","password":"secret"}"#)
                    #expect(try await b.request(.get, "/v1/session", token: token).status == .ok, "B resumes it from the store")
                    #expect(try await a.request(.delete, "/v1/session", token: token).status == .noContent)
                    expectError(try await a.request(.get, "/v1/session", token: token), .unauthorized, "session-expired")
                    // Past B's check interval, its next request looks the session up before it serves.
                    time.advance(by: .milliseconds(100))
                    expectError(try await b.request(.get, "/v1/session", token: token), .unauthorized, "session-expired")
                    expectError(try await b.request(.post, "/v1/methods/echo", token: token, body: "[1]"), .unauthorized, "session-expired")
                }
            }
        }
    }

    /// Once shutdown begins, `/readyz` sends a load balancer elsewhere (drain) while requests go on.
    @Test func readinessSaysShuttingDownOnceShutdownBegins() async throws {
        try await BridgeHarness.run(configure: { $0.shutdownGrace = .seconds(30) }) { h in
            let (token, _) = try await h.session()
            try await h.readiness("ready") { $0.status == .ok }
            h.registry.beginShutdown()
            expectError(try await h.request(.get, "/readyz"), .serviceUnavailable, "shutting-down")
            #expect(try await h.request(.get, "/v1/session", token: token).status == .ok, "requests in flight go on")
        }
    }
}
