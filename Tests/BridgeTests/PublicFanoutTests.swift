import Bridge
import DDP
import DDPServer
import FaultKit
import Foundation
import Glibc
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

/// `--public-publications`: publications read without a session, shared by every reader.
@Suite struct PublicFanoutTests {
    // MARK: - The setting (pure)

    @Test func theSettingNamesPublicationsAndTheirParameters() throws {
        let publications = try PublicPublications(parsing: " ticker(number, integer) ,tasks(*), typed ,flags(boolean,null,string,object,array,any)")
        #expect(publications.entries.keys.sorted() == ["flags", "tasks", "ticker", "typed"])
        #expect(publications.entries["typed"]?.signature == "typed")
        #expect(publications.entries["tasks"]?.signature == "tasks(*)")
        #expect(publications.entries["ticker"]?.signature == "ticker(number,integer)")

        try publications.check("typed", [])
        try publications.check("tasks", [["listId": "inbox"], 1, "x"])
        try publications.check("ticker", [0.5, 3])
        try publications.check("ticker", [2, 3.0])
        try publications.check("flags", [true, .null, "s", [:], [], 7])
        for (name, params) in [("ticker", [1.5, 2.5]), ("ticker", [1]), ("ticker", ["1", 2]), ("typed", [1]), ("flags", [1, .null, "s", [:], [], 7])]
            as [(String, [EJSON])]
        {
            #expect(throws: BridgeError.self, "\(name) \(params)") { try publications.check(name, params) }
        }
        do {
            try publications.check("secret", [])
            Issue.record("a publication not named was admitted")
        } catch {
            #expect(error.status == .forbidden)
            #expect(error.error == "not-public")
        }
        #expect(try PublicPublications(parsing: "").isEmpty)
        #expect(try PublicPublications(parsing: " , ").isEmpty)
        for bad in ["a(", "a)", "a(b)c", "a(string", "a((string))", "a(strin)", "a,a", "a b", "(string)", "a(string,,number)"] {
            #expect(throws: PublicPublications.Invalid.self, "\(bad)") { try PublicPublications(parsing: bad) }
        }
        let refused = #expect(throws: Settings.Invalid.self) {
            try Settings(flags: ["upstream": "ws://127.0.0.1:3000/websocket", "public-publications": "tasks(strnig)"], environment: [:])
        }
        #expect(refused?.description.contains("--public-publications (DDP_BRIDGE_PUBLIC_PUBLICATIONS)") == true)
        #expect(refused?.description.contains("'strnig'") == true)
    }

    // MARK: - Through real HTTP

    static func run(
        _ publications: String = "tasks(*),typed",
        configure: @escaping @Sendable (inout BridgeConfiguration) -> Void = { _ in },
        _ body: @Sendable (BridgeHarness, Int) async throws -> Void
    ) async throws {
        let parsed = try PublicPublications(parsing: publications)
        try await BridgeHarness.run(configure: {
            $0.publicPublications = parsed
            // A reader that went away is noticed at the next write (a heartbeat at the latest).
            $0.heartbeatInterval = .milliseconds(200)
            configure(&$0)
        }) { h in
            try await body(h, try #require(h.client.port))
        }
    }

    /// Opens `count` streams of `path` (each on its own connection) for the duration of `body`.
    static func withReaders(
        _ count: Int, port: Int, _ path: String, opened: [SSEReader] = [], _ body: @Sendable ([SSEReader]) async throws -> Void
    ) async throws {
        guard opened.count < count else { return try await body(opened) }
        try await withEventStream(port: port, path, token: nil) { reader in
            try await withReaders(count, port: port, path, opened: opened + [reader], body)
        }
    }

    static func documentEvents(_ events: [SSEEvent]) -> [SSEEvent] {
        events.filter { ["added", "changed", "removed"].contains($0.event) }
    }

    /// The documents a stream's events leave, by id (snapshot and live changes applied in order).
    static func apply(_ events: [SSEEvent]) -> [String: EJSONObject] {
        var documents: [String: EJSONObject] = [:]
        for event in events {
            let json = event.json
            guard let id = json["id"]?.stringValue else {
                if event.event == "reset" { documents = [:] }
                continue
            }
            switch event.event {
            case "added":
                if case .object(let fields)? = json["fields"] { documents[id] = fields } else { documents[id] = [:] }
            case "changed":
                if case .object(let fields)? = json["fields"] { for field in fields { documents[id]?[field.key] = field.value } }
                if case .array(let cleared)? = json["cleared"] { for key in cleared { if let key = key.stringValue { documents[id]?[key] = nil } } }
            case "removed":
                documents[id] = nil
            default:
                break
            }
        }
        return documents
    }

    /// The reader that brings a public subscription starts as a session stream with the same
    /// `subscribe=` does: the documents as `added`, then `ready`, then changes. Before, it got
    /// `changed` events for a document it was never sent.
    @Test func thePublicStreamStartsAsTheSessionStreamDoes() async throws {
        try await Self.run("ticker(*)") { h, port in
            let params = urlEncoded("[20,3]")
            @Sendable func kinds(_ events: [SSEEvent]) -> [String] {
                events.compactMap { ["added", "changed", "ready"].contains($0.event) ? $0.event : nil }
            }
            let (token, _) = try await h.session()
            let session = try await withEventStream(port: port, "/v1/events?subscribe=ticker&params=\(params)", token: token) { stream in
                try await stream.wait("the third tick") { $0.contains { $0.event == "changed" && $0.json["fields"]?["n"] == 3 } }
                return kinds(await stream.events)
            }
            try await withEventStream(port: port, "/v1/public/events?subscribe=ticker&params=\(params)", token: nil) { stream in
                try await stream.wait("the third tick") { $0.contains { $0.event == "changed" && $0.json["fields"]?["n"] == 3 } }
                let events = await stream.events
                #expect(kinds(events).first == "added", "\(kinds(events))")
                #expect(events.first { $0.event == "added" }?.json["fields"]?["n"] == 0)
                // Ticks published together may be consolidated: compare where the changes begin.
                #expect(Array(kinds(events).prefix(2)) == Array(session.prefix(2)), "public \(kinds(events)), session \(session)")
            }
        }
    }

    @Test func manyReadersShareOneUpstreamConnectionAndSubscription() async throws {
        try await Self.run { h, port in
            // The readiness probe keeps a connection of its own; count from when it is up (the
            // public pool connects with its first subscription, and no session is made yet).
            try await h.upstream.core.wait("the readiness probe's connection") { $0.connectionCount >= 1 }
            let before = await h.upstream.core.connectionCount
            let readers = 8
            try await Self.withReaders(readers, port: port, "/v1/public/events?subscribe=tasks&collections=tasks&snapshot=true") { streams in
                for stream in streams {
                    try await stream.wait("snapshot") { $0.contains { $0.event == "snapshot" } }
                    #expect(await stream.status == 200)
                }
                #expect(await h.upstream.core.connectionCount == before + 1, "one upstream connection for every public reader")
                #expect(await h.upstream.core.subscriptionCount(named: "tasks") == 1, "one upstream subscription for every public reader")

                // Writes through a session (writes are never public) reach every reader, in order.
                let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
                for n in 0..<10 {
                    let inserted = try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"_id":"p\#(n)","text":"public \#(n)"}"#)
                    #expect(inserted.status == .created)
                    _ = try await h.request(.patch, "/v1/collections/tasks/p\(n)", token: token, body: #"{"done":true}"#)
                }
                _ = try await h.request(.delete, "/v1/collections/tasks/p0", token: token)
                // The public connection gets the session's writes from the upstream a moment later
                // (a read at once once saw 10 of the 12 documents): read once it has them all, which
                // its readers see as the removal, the last write, reaches them (the upstream sends
                // one connection's changes in order; a reader's events follow its connection's cache).
                let first = try #require(streams.first)
                try await first.wait("the public view has the writes") {
                    $0.contains { $0.event == "removed" && $0.json["id"] == "p0" }
                }
                #expect(try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks&limit=0")["count"] == 12)
                let read = try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks&limit=100")
                #expect(read.status == .ok, "\(read.text)")
                var expected: [String: EJSONObject] = [:]
                if case .array(let documents)? = read["documents"] {
                    for case .object(var document) in documents {
                        let id = document["_id"]?.stringValue ?? ""
                        document["_id"] = nil
                        expected[id] = document
                    }
                }
                #expect(expected.count == 12)
                try await first.wait("every change") { Self.apply($0) == expected }
                let reference = Self.documentEvents(await first.events)
                for stream in streams.dropFirst() {
                    try await stream.wait("every change") { Self.apply($0) == expected }
                    let events = Self.documentEvents(await stream.events)
                    #expect(events == reference, "every reader gets the same events in the same order")
                    #expect(await stream.violations.isEmpty)
                }
                #expect(await h.upstream.core.subscriptionCount(named: "tasks") == 1)
                let metrics = try await h.request(.get, "/metrics").text
                #expect(metricSample(metrics, "ddp_bridge_public_readers") == Double(readers))
                #expect(metricSample(metrics, "ddp_bridge_public_subscriptions") == 1)
            }
            // When the last reader has gone and the linger is over, the subscription is stopped upstream.
            try await h.upstream.core.wait("the public subscription stopped upstream") { $0.subscriptionCount(named: "tasks") == 0 }
            let metrics = try await h.request(.get, "/metrics").text
            #expect(metricSample(metrics, "ddp_bridge_public_readers") == 0)
            #expect(metricSample(metrics, "ddp_bridge_public_subscriptions") == 0)
            #expect((metricSample(metrics, "ddp_bridge_public_events_delivered_total") ?? 0) >= Double(readers * 20))
            // Its connection, which nothing uses any more, is closed.
            try await h.metrics("the public connection closed") {
                (metricSample($0, #"ddp_bridge_public_upstream_connections{state="connected"}"#) ?? 0) == 0
            }
        }
    }

    /// By default each distinct public subscription has an upstream connection of its own: a read
    /// of `tasks` for the inbox while another reader holds `tasks` for work answers the inbox's
    /// documents alone, and a stream of one subscription sees no `ready` or `nosub` of another.
    @Test func publicReadsOfDistinctSubscriptionsNeverMix() async throws {
        try await Self.run { h, port in
            let work = urlEncoded(#"[{"listId":"work"}]"#)
            let inbox = urlEncoded(#"[{"listId":"inbox"}]"#)
            try await withEventStream(port: port, "/v1/public/events?subscribe=tasks&params=\(work)&snapshot=true", token: nil) { stream in
                try await stream.wait("work's snapshot") { $0.contains { $0.event == "snapshot" } }
                for _ in 0..<3 {
                    let read = try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks&params=\(inbox)")
                    #expect(read.status == .ok)
                    #expect(read["documents"]?.arrayValue?.compactMap { $0["_id"]?.stringValue }.sorted() == ["task-a1", "task-b1"], "\(read.text)")
                    let typed = try await h.request(.get, "/v1/public/collections/typed?subscribe=typed")
                    #expect(typed["count"] == 1)
                }
                // The reads' subscriptions linger out and stop upstream meanwhile; then a change to work's task.
                try await h.metrics("the reads' subscriptions stopped") { metricSample($0, "ddp_bridge_public_subscriptions") == 1 }
                let (token, _) = try await h.session()
                _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
                #expect(try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"done":true}"#).status == .ok)
                try await stream.wait("the change") { $0.contains { $0.event == "changed" } }
                let events = await stream.events
                let documents = Set(events.compactMap { $0.json["id"]?.stringValue })
                #expect(documents == ["task-a2"], "\(events)")
                #expect(!events.contains { $0.event == "nosub" }, "\(events)")
                #expect(events.filter { $0.event == "ready" }.count <= 1, "\(events)")
            }
            // Once nothing uses them, their connections are closed.
            try await h.metrics("every public connection closed") {
                metricSample($0, "ddp_bridge_public_subscriptions") == 0
                    && (metricSample($0, #"ddp_bridge_public_upstream_connections{state="connected"}"#) ?? 0) == 0
            }
        }
    }

    /// A loop's feed writes a turn's bytes at once to a reader that keeps up, but never past the
    /// stream's limit: silent public readers, each with a filter of its own, are cut as slow
    /// consumers by a change larger than their limit, as a session's stream is (the feed once
    /// wrote the change to each of them whole, a copy per filter, and never cut them).
    @Test func aChangeLargerThanTheStreamLimitCutsSilentPublicReadersWhateverTheirFilters() async throws {
        try await Self.run(configure: { $0.streamBufferLimit = 64 << 10 }) { h, port in
            let paths = ["tasks", "tasks,lists", "tasks,users", "tasks,other"].map { "/v1/public/events?subscribe=tasks&collections=\($0)" }
            try await Self.withSilentReaders(paths, port: port) { readers in
                let (token, _) = try await h.session()
                let big = String(repeating: "x", count: 200 << 10)
                #expect(try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"text":"\#(big)"}"#).status == .created)
                for reader in readers {
                    await reader.resume()
                    try await reader.waitUntilFinished()
                    let last = await reader.events.last
                    #expect(last?.event == "error" && last?.json["error"] == "slow-consumer", "\(String(describing: last))")
                    #expect(await !reader.events.contains { $0.data.utf8.count > 64 << 10 }, "the change was not written past the limit")
                }
            }
        }
    }

    /// Opens a stream of each path, each paused once open (reading nothing), for the duration of `body`.
    static func withSilentReaders(
        _ paths: [String], port: Int, opened: [SSEReader] = [], _ body: @Sendable ([SSEReader]) async throws -> Void
    ) async throws {
        guard opened.count < paths.count else { return try await body(opened) }
        try await withEventStream(port: port, paths[opened.count], token: nil) { reader in
            try await reader.waitUntilOpen()
            await reader.pause()
            try await withSilentReaders(paths, port: port, opened: opened + [reader], body)
        }
    }

    @Test func whatIsNotPublicAndWhatIsTooMuchIsRefusedWithAReason() async throws {
        try await Self.run(
            "tasks(*),typed",
            configure: {
                $0.publicMaxSubscriptions = 3
                $0.publicMaxReadersPerAddress = 2
                $0.publicConnections = 3
                // Long enough that no subscription lingers out while the test runs.
                $0.subscriptionLinger = .seconds(60)
            }
        ) { h, port in
            let listed = try await h.request(.get, "/v1/public/publications")
            #expect(listed.status == .ok)
            #expect(listed["publications"]?.arrayValue?.compactMap { $0["signature"]?.stringValue } == ["tasks(*)", "typed"])

            expectError(try await h.request(.get, "/v1/public/events?subscribe=myTasks"), .forbidden, "not-public")
            expectError(try await h.request(.get, "/v1/public/collections/tasks?subscribe=myTasks"), .forbidden, "not-public")
            expectError(try await h.request(.get, "/v1/public/events?subscribe=typed&params=%5B1%5D"), .badRequest, "invalid-params")
            expectError(try await h.request(.get, "/v1/public/events"), .badRequest, "bad-request")
            expectError(try await h.request(.get, "/v1/public/events?subscribe=typed&params=%7B%7D"), .badRequest, "bad-request")
            expectError(try await h.request(.get, "/v1/public/events?subscribe=typed&selector=%7B%7D"), .badRequest, "bad-request")
            // Writes are never public: the public routes take GET only.
            #expect(try await h.request(.post, "/v1/public/collections/tasks?subscribe=tasks", body: "{}").status == .methodNotAllowed)

            // Readers per address: two open, the third refused; one leaves, a new one is admitted.
            try await withEventStream(port: port, "/v1/public/events?subscribe=typed", token: nil) { one in
                try await one.waitUntilOpen()
                try await withEventStream(port: port, "/v1/public/events?subscribe=typed", token: nil) { two in
                    try await two.waitUntilOpen()
                    let refused = try await requestOnOwnConnection(port: port, .GET, "/v1/public/events?subscribe=typed", token: nil)
                    #expect(refused.status == 429)
                    #expect(refused.body.contains("too-many-public-streams"), "\(refused.body)")
                }
            }
            try await h.metrics("the readers have left") { metricSample($0, "ddp_bridge_public_readers") == 0 }
            try await withEventStream(port: port, "/v1/public/events?subscribe=typed&snapshot=true", token: nil) { again in
                try await again.wait("snapshot") { $0.contains { $0.event == "snapshot" } }
            }

            // Three distinct subscriptions are allowed (typed, lingering after the readers, and
            // two of tasks); a fourth (other params) is refused, and nothing was subscribed
            // upstream for it.
            let a = try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks")
            let b = try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks&params=\(urlEncoded(#"[{"listId":"inbox"}]"#))")
            #expect(a.status == .ok && b.status == .ok, "\(a.text) \(b.text)")
            #expect(a["count"] == 3)
            #expect(b["count"] == 2, "a subscription placed on a connection of its own is read exactly")
            let third = try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks&params=\(urlEncoded(#"[{"listId":"work"}]"#))")
            expectError(third, .serviceUnavailable, "too-many-public-subscriptions")
            #expect(third.headers[.retryAfter] != nil)
            #expect(await h.upstream.core.subscriptionCount(named: "tasks") == 2)
        }
    }

    /// One address filled the process-wide cap on distinct public subscriptions with reads of
    /// distinct params (~100 reads in 0.2 s), and everyone else's new public reads and streams
    /// got 503 for as long as it went on. An address now has a share; reading or streaming a
    /// subscription that exists is free; params that differ only in key order are one subscription.
    @Test func oneAddressCannotTakeEveryPublicSubscription() async throws {
        try await Self.run(
            configure: {
                $0.publicMaxSubscriptions = 6
                $0.publicMaxSubscriptionsPerAddress = 3
                $0.publicConnections = 1
                $0.subscriptionLinger = .seconds(60)
                $0.trustedProxies = [IPRange("127.0.0.1")!]
            }
        ) { h, port in
            let attacker: HTTPFields = [.init("X-Forwarded-For")!: "203.0.113.9"]
            let other: HTTPFields = [.init("X-Forwarded-For")!: "198.51.100.7"]
            func read(_ params: String, _ headers: HTTPFields) async throws -> BridgeHarness.Reply {
                try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks&params=\(urlEncoded(params))", headers: headers)
            }
            for n in 0..<3 { #expect(try await read("[\(n)]", attacker).status == .ok) }
            let refused = try await read("[3]", attacker)
            expectError(refused, .tooManyRequests, "too-many-public-subscriptions-from-address")
            #expect(refused.headers[.retryAfter] != nil)
            // Streams count against the same share.
            let stream = try await h.request(.get, "/v1/public/events?subscribe=tasks&params=\(urlEncoded("[4]"))", headers: attacker)
            expectError(stream, .tooManyRequests, "too-many-public-subscriptions-from-address")
            // Another address is served, and the same params in another key order are one subscription.
            let first = try await read(#"[{"listId":"inbox","x":1}]"#, other)
            let reordered = try await read(#"[{"x":1,"listId":"inbox"}]"#, other)
            #expect(first.status == .ok && reordered.status == .ok && reordered.text == first.text, "\(reordered.text)")
            #expect(await h.upstream.core.subscriptionCount(named: "tasks") == 4)
            try await withEventStream(
                port: port, "/v1/public/events?subscribe=tasks&params=\(urlEncoded(#"[{"listId":"work"}]"#))&snapshot=true", token: nil
            ) {
                stream in
                try await stream.wait("snapshot") { $0.contains { $0.event == "snapshot" } }
            }
            // What exists is free to read for the address whose share is spent.
            #expect(try await read(#"[{"listId":"inbox","x":1}]"#, attacker).status == .ok)
            #expect(try await read("[0]", attacker).status == .ok)
            #expect(await h.upstream.core.subscriptionCount(named: "tasks") == 5)
        }
    }

    /// A reader that hangs up frees its place at once (its connection's close ends the stream),
    /// not at the next write: with heartbeats a minute apart, a public reader's per-address slot
    /// and a session's stream slot come back within moments. Failed before: both were held until
    /// the next heartbeat.
    @Test func aReaderThatHangsUpFreesItsPlaceAtOnce() async throws {
        try await Self.run(
            configure: {
                $0.heartbeatInterval = .seconds(60)
                $0.publicMaxReadersPerAddress = 1
                $0.maxStreamsPerSession = 1
            }
        ) { h, port in
            let (token, _) = try await h.session()
            for round in 1...3 {
                try await withEventStream(port: port, "/v1/public/events?subscribe=typed&snapshot=true", token: nil) { reader in
                    try await reader.wait("snapshot \(round)") { $0.contains { $0.event == "snapshot" } }
                }
                try await withEventStream(port: port, "/v1/events?snapshot=true", token: token) { reader in
                    try await reader.wait("session snapshot \(round)") { $0.contains { $0.event == "snapshot" } }
                }
                try await h.metrics("the public reader's place is free (round \(round))", timeout: .seconds(5)) {
                    metricSample($0, "ddp_bridge_public_readers") == 0
                }
                try await h.metrics("the session's stream slot is free (round \(round))", timeout: .seconds(5)) {
                    metricSample($0, "ddp_bridge_sse_streams") == 0
                }
            }
        }
    }

    /// Public readers are written by their loop's feed once their writer is known, and got their
    /// events from the connection directly until then: readers that open one after another (with a
    /// snapshot, and live from the log) while changes pour in each end with exactly the public
    /// view's documents, without an event missed or doubled (an add of a document held, a change
    /// or removal of one not held), and every live reader with every change after it opened.
    @Test func publicReadersOpenedDuringAChangeStormNeitherMissNorDoubleAnEvent() async throws {
        try await Self.run { h, port in
            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            let readers = 6
            let (opened, openedOne) = AsyncStream<Void>.makeStream()
            let written = LockedBox(0)
            let progress = ChangeSignal()
            let received = try await withThrowingTaskGroup(of: (snapshot: Bool, events: [SSEEvent]).self) { group in
                for n in 0..<readers {
                    // Reader n opens after 8 n writes; even ones with a snapshot, odd ones live.
                    let snapshot = n % 2 == 0
                    group.addTask {
                        try await progress.wait("the storm's first \(8 * n) writes", timeout: .seconds(30)) { written.value >= 8 * n }
                        let path = "/v1/public/events?subscribe=tasks&collections=tasks" + (snapshot ? "&snapshot=true" : "")
                        return try await withEventStream(port: port, path, token: nil) { stream in
                            if snapshot {
                                try await stream.wait("the snapshot") { $0.contains { $0.event == "snapshot" } }
                            } else {
                                try await stream.waitUntilOpen()
                            }
                            openedOne.yield()
                            try await stream.wait("the last change", timeout: .seconds(30)) { events in
                                events.contains { $0.event == "changed" && $0.json["fields"]?["last"] == true }
                            }
                            return (snapshot, await stream.events)
                        }
                    }
                }
                try await EventStreamTests.storm(h, token: token, writes: 60, written: written, progress: progress, opened: opened, streams: readers)
                return try await group.reduce(into: [(snapshot: Bool, events: [SSEEvent])]()) { $0.append($1) }
            }
            // Every reader has the last write: the public view has every write before it.
            let read = try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks&limit=100")
            var truth: [String: EJSONObject] = [:]
            for document in read["documents"]?.arrayValue ?? [] {
                guard var fields = document.objectValue, let id = fields["_id"]?.stringValue else { continue }
                fields.removeValue(forKey: "_id")
                truth[id] = fields
            }
            #expect(truth["task-a1"]?["last"] == true && truth.count >= 3, "\(truth)")
            #expect(received.count == readers)
            for (n, reader) in received.enumerated() {
                // Every event of the public connection's log is a `tasks` one or has no
                // collection: from its first, a reader's ids follow one another without a gap
                // (an event missed) or a step back (one doubled).
                let ids = reader.events.compactMap { $0.id.flatMap { UInt64($0) } }
                #expect(ids.count >= 2 && zip(ids, ids.dropFirst()).allSatisfy { $1 == $0 + 1 }, "reader \(n): \(ids)")
                let ticks = reader.events.compactMap { $0.event == "changed" && $0.json["id"] == "task-a1" ? $0.json["fields"]?["n"]?.intValue : nil }
                #expect(ticks == ticks.sorted(), "reader \(n) got task-a1's changes out of order: \(ticks)")
                guard reader.snapshot else { continue }
                let (documents, impossible) = EventStreamTests.replay(reader.events)
                #expect(impossible.isEmpty, "reader \(n): \(impossible)")
                #expect(documents == truth, "reader \(n) ends with the public view's documents")
            }
        }
    }

    /// The demo's ticker took a NaN rate (`{"$InfNaN":0}`) through its clamp and trapped when it
    /// converted it: any reader allowed its parameters could stop the demo (and every test
    /// server). Now a NaN means the default rate.
    @Test func aNaNTickerRateFromAPublicReaderStopsNothing() async throws {
        try await Self.run("ticker(*)") { h, port in
            let params = urlEncoded(#"[{"$InfNaN":0},3,false,{"$InfNaN":0}]"#)
            try await withEventStream(port: port, "/v1/public/events?subscribe=ticker&params=\(params)&collections=ticks&snapshot=true", token: nil) {
                stream in
                try await stream.wait("the three ticks at the default rate") { events in
                    Self.apply(events)["t1"]?["n"] == 3
                }
            }
            #expect(try await h.request(.get, "/v1/public/collections/ticks?subscribe=ticker&params=\(params)").status == .ok)
        }
    }

    /// Two ways a stream's book-keeping leaked for good, both reachable by anyone: `HEAD` of a
    /// stream route (Hummingbird's generated HEAD runs the GET and drops its body, so the body
    /// that releases everything never ran), and a client gone before its response starts (the
    /// route waited for the upstream; Hummingbird then never runs the body). Each left the
    /// reader counted, its subscription referenced and its stream attached: a few such requests
    /// locked an address out. Both failed before.
    @Test func aStreamThatNeverStartsHoldsNothing() async throws {
        try await Self.run(
            "typed,bulk(integer)",
            configure: {
                $0.publicMaxReadersPerAddress = 2
                $0.heartbeatInterval = .seconds(60)
            }
        ) { h, port in
            let (token, _) = try await h.session()
            for _ in 0..<3 {
                let head = try await h.request(.head, "/v1/public/events?subscribe=typed")
                #expect(head.status == .ok)
                #expect(head.headers[.contentType] == "text/event-stream")
                #expect(try await h.request(.head, "/v1/events", token: token).status == .ok)
            }
            #expect(try await h.request(.head, "/v1/public/events?subscribe=secret").status == .forbidden)
            #expect(try await h.request(.head, "/v1/events").status == .unauthorized)

            // Clients that leave (connection reset) while their reader's subscription is still
            // getting ready (30,000 documents to load): the route goes on, and its answer finds
            // the connection gone.
            var sockets: [Int32] = []
            for _ in 0..<2 {
                sockets.append(try Self.rawRequest(port: port, "GET /v1/public/events?subscribe=bulk&params=%5B30000%5D HTTP/1.1\r\nHost: x\r\n\r\n"))
            }
            try await h.metrics("the readers are counted") { metricSample($0, "ddp_bridge_public_readers") == 2 }
            // Reset, not closed: the server's side of the connection is gone at once (no half-closure).
            for socket in sockets {
                var reset = linger(l_onoff: 1, l_linger: 0)
                _ = setsockopt(socket, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
                _ = Glibc.close(socket)
            }
            try await h.metrics("nothing is held by streams that never started", timeout: .seconds(30)) { metrics in
                metricSample(metrics, "ddp_bridge_public_readers") == 0 && metricSample(metrics, "ddp_bridge_public_subscriptions") == 0
                    && metricSample(metrics, "ddp_bridge_sse_streams") == 0
            }
            try await withEventStream(port: port, "/v1/public/events?subscribe=typed&snapshot=true", token: nil) { one in
                try await withEventStream(port: port, "/v1/public/events?subscribe=typed&snapshot=true", token: nil) { two in
                    for reader in [one, two] { try await reader.wait("snapshot") { $0.contains { $0.event == "snapshot" } } }
                }
            }
        }
    }

    /// A plain socket with `request` sent on it (so the test can reset it, which NIO's options cannot).
    static func rawRequest(port: Int, _ request: String) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(clamping: port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard socket >= 0, connected == 0 else { throw CancellationError() }
        let bytes = Array(request.utf8)
        guard Glibc.send(socket, bytes, bytes.count, 0) == bytes.count else { throw CancellationError() }
        return socket
    }

    @Test func nothingIsPublicUnlessTheOperatorSaysSo() async throws {
        try await Self.run("") { h, _ in
            let listed = try await h.request(.get, "/v1/public/publications")
            #expect(listed["publications"] == [])
            expectError(try await h.request(.get, "/v1/public/events?subscribe=tasks"), .forbidden, "not-public")
            expectError(try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks"), .forbidden, "not-public")
            #expect(await h.upstream.core.subscriptionCount(named: "tasks") == 0)
        }
    }

    /// A public read of a collection the publication sent nothing of says so, as a session's does.
    @Test func aPublicReadOfACollectionNotSentSaysSo() async throws {
        try await Self.run { h, _ in
            let typo = try await h.request(.get, "/v1/public/collections/task?subscribe=tasks")
            #expect(typo.status == .ok && typo["documents"] == [] && typo["count"] == 0, "\(typo.text)")
            #expect(typo["collectionHeld"] == false && typo["heldCollections"] == ["tasks"], "\(typo.text)")
            let hint = try #require(typo["hint"]?.stringValue)
            #expect(hint.contains("'tasks' has sent no document of 'task' (did you mean 'tasks'?)"), "\(hint)")
            let held = try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks")
            #expect(held["count"] == 3 && held.json.objectValue?.keys.sorted() == ["count", "documents"], "\(held.text)")
        }
    }

    @Test func aCollectionReadCarriesAnETagThatCachesRevalidate() async throws {
        try await Self.run(configure: { $0.publicMaxAge = 5 }) { h, port in
            let path = "/v1/public/collections/tasks?subscribe=tasks&sort=%7B%22_id%22%3A1%7D"
            let first = try await h.request(.get, path)
            #expect(first.status == .ok)
            #expect(first["count"] == 3)
            #expect(first.headers[.cacheControl] == "public, max-age=5")
            let tag = try #require(first.headers[.eTag])
            #expect(tag.hasPrefix("\"") && tag.hasSuffix("\"") && tag.count == 34)

            let unchanged = try await h.request(.get, path, headers: [.ifNoneMatch: tag])
            #expect(unchanged.status == .notModified)
            #expect(unchanged.text.isEmpty)
            #expect(unchanged.headers[.eTag] == tag)
            #expect(try await h.request(.get, path, headers: [.ifNoneMatch: "\"other\", W/\(tag)"]).status == .notModified)
            #expect(try await h.request(.get, path, headers: [.ifNoneMatch: "\"other\""]).status == .ok)

            let (token, _) = try await h.session()
            // A reader of the same subscription sees the change once the public view has it.
            try await withEventStream(port: port, "/v1/public/events?subscribe=tasks&collections=tasks", token: nil) { reader in
                try await reader.waitUntilOpen()
                _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: token, body: #"{"done":true}"#)
                try await reader.wait("the change reaches the public view") {
                    $0.contains { $0.event == "changed" && $0.json["id"] == "task-a1" }
                }
                let changed = try await h.request(.get, path, headers: [.ifNoneMatch: tag])
                #expect(changed.status == .ok && changed.headers[.eTag] != tag, "\(changed.status) \(changed.headers[.eTag] ?? "")")
            }
            // Another query of the same data is another representation, with its own tag.
            let limited = try await h.request(.get, path + "&limit=1")
            #expect(limited.status == .ok)
            #expect(limited.headers[.eTag] != tag)
            #expect(limited.headers[.vary] == nil, "no CORS, nothing varies")
        }
        // With CORS on, the answer depends on the Origin: shared caches must key on it.
        try await Self.run(configure: { $0.corsOrigins = ["http://app.example"] }) { h, _ in
            // Also (above all) the answers without an Origin, or to an origin CORS leaves alone.
            for origin in [nil, "http://app.example", "https://other.example"] {
                let headers: HTTPFields = origin.map { [.origin: $0] } ?? [:]
                let read = try await h.request(.get, "/v1/public/collections/tasks?subscribe=tasks", headers: headers)
                #expect(read.status == .ok)
                #expect(read.headers[values: .vary].contains { $0.contains("Origin") }, "\(origin ?? "none"): \(read.headers)")
            }
        }
    }

    @Test func aReaderResumesFromTheSharedLogAndSeesOnlyTheNetDifferenceAfterAnUpstreamDrop() async throws {
        try await Self.run { h, port in
            let (token, _) = try await h.session()
            let path = "/v1/public/events?subscribe=tasks&collections=tasks"
            // A reader that stays (so the subscription does), and one that leaves and comes back.
            try await withEventStream(port: port, path + "&snapshot=true", token: nil) { stays in
                try await stays.wait("snapshot") { $0.contains { $0.event == "snapshot" } }
                let lastID = try await withEventStream(port: port, path + "&snapshot=true", token: nil) { leaves in
                    try await leaves.wait("snapshot") { $0.contains { $0.event == "snapshot" } }
                    _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: token, body: #"{"text":"first"}"#)
                    try await leaves.wait("the first change") { Self.documentEvents($0).count == 4 }
                    return try #require(await leaves.events.last { $0.id != nil }?.id)
                }
                _ = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"text":"missed"}"#)
                try await stays.wait("the missed change") { Self.documentEvents($0).count == 5 }
                try await withEventStream(port: port, path, token: nil, headers: [("Last-Event-ID", lastID)]) { back in
                    try await back.wait("the missed change, replayed") { Self.documentEvents($0).count == 1 }
                    let replayed = Self.documentEvents(await back.events)
                    #expect(replayed.map(\.event) == ["changed"])
                    #expect(replayed.first?.json["fields"] == ["text": "missed"])
                    #expect(await back.events.contains { $0.event == "reset" } == false)
                }
                // An id this log never issued means reset and a snapshot.
                try await withEventStream(port: port, path, token: nil, headers: [("Last-Event-ID", "5")]) { stranger in
                    try await stranger.wait("reset and snapshot") { $0.contains { $0.event == "snapshot" } }
                    #expect(await stranger.events.first { $0.event != "connection" }?.event == "reset")
                }

                // The Meteor app drops every connection and a document is added meanwhile: the
                // reader is told, and then gets only what changed (not the documents again).
                let seen = Self.documentEvents(await stays.events).count
                await h.upstream.core.closeAllConnections()
                try await h.upstream.core.insert("tasks", ["_id": "while-down", "text": "added while the bridge was away"])
                try await stays.wait("back, with the difference") { events in
                    events.contains { $0.event == "connection" && $0.json["state"] == "reconnecting" }
                        && Self.documentEvents(events).count > seen
                }
                // A write after the return is a fence: whatever else the return brought reached
                // the reader before it.
                @Sendable func isFence(_ event: SSEEvent) -> Bool { event.json["id"] == "task-a2" && event.json["fields"]?["text"] == "fence" }
                _ = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"text":"fence"}"#)
                try await stays.wait("the write after the return") { Self.documentEvents($0).contains(where: isFence) }
                let after = Array(Self.documentEvents(await stays.events).dropFirst(seen))
                #expect(
                    after.map(\.event) == ["added", "changed"] && after.last.map(isFence) == true, "only the net difference: \(after.map(\.data))")
                #expect(after.first?.json["id"] == "while-down")
                let states = await stays.events.filter { $0.event == "connection" }.compactMap { $0.json["state"]?.stringValue }
                #expect(states.suffix(1) == ["connected"], "\(states)")
            }
        }
    }
}
