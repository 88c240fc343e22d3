import Bridge
import DDP
import DDPClient
import DDPServer
import FaultKit
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite struct EventStreamTests {
    func documentEvents(_ events: [SSEEvent]) -> [SSEEvent] {
        events.filter { ["added", "changed", "removed", "moved"].contains($0.event) }
    }

    @Test func snapshotThenLiveChangesWithDetails() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
            let port = try #require(h.client.port)
            try await withEventStream(port: port, "/v1/events?snapshot=true&collections=tasks", token: token) { stream in
                try await stream.wait("snapshot marker") { $0.contains { $0.event == "snapshot" } }
                #expect(await stream.status == 200)
                #expect(await stream.contentType == "text/event-stream")
                #expect(await stream.retry == 2_000)
                let snapshot = await stream.events
                #expect(snapshot.map(\.event) == ["reset", "added", "added", "added", "snapshot"])
                #expect(snapshot.last?.json == ["count": 3])
                // A snapshot's documents come in the order of the session's map, not sorted.
                #expect(snapshot.dropFirst().dropLast().compactMap { $0.json["id"]?.stringValue }.sorted() == ["task-a1", "task-a2", "task-b1"])
                #expect(snapshot.map { $0.id != nil } == [false, false, false, false, true], "only the marker moves Last-Event-ID")

                _ = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"$set":{"done":true},"$unset":{"listId":1}}"#)
                let inserted = try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"_id":"t9","text":"new"}"#)
                #expect(inserted.status == .created)
                _ = try await h.request(.delete, "/v1/collections/tasks/t9", token: token)
                try await stream.wait("three live events") { documentEvents($0).count >= 6 }
                let live = Array(documentEvents(await stream.events).dropFirst(3))
                #expect(live.map(\.event) == ["changed", "added", "removed"])
                #expect(
                    live[0].json == [
                        "collection": "tasks", "id": "task-a2", "fields": ["done": true], "cleared": ["listId"],
                        "previous": ["done": false, "listId": "work"]
                    ])
                #expect(live[1].json == ["collection": "tasks", "id": "t9", "fields": ["text": "new"]])
                #expect(live[2].json == ["collection": "tasks", "id": "t9", "previous": ["text": "new"]])
                let ids = await stream.events.compactMap { $0.id.flatMap(UInt64.init) }
                #expect(ids == ids.sorted(), "ids never go back")
                #expect(await stream.violations.isEmpty)
            }
        }
    }

    @Test func filtersAndLiveQueries() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"[{"name":"tasks"},{"name":"typed"}]"#)
            let port = try #require(h.client.port)
            let query = urlEncoded(#"{"listId":"inbox","done":{"$ne":true}}"#)
            try await withEventStream(port: port, "/v1/events?collections=tasks&selector=\(query)&snapshot=true", token: token) { liveQuery in
                try await withEventStream(port: port, "/v1/events?collections=tasks&id=task-a2", token: token) { one in
                    // A live stream sees what happens once it is registered: wait for that before the changes.
                    try await one.waitUntilOpen()
                    try await liveQuery.wait("snapshot") { $0.contains { $0.event == "snapshot" } }
                    #expect(documentEvents(await liveQuery.events).compactMap { $0.json["id"]?.stringValue }.sorted() == ["task-a1", "task-b1"])
                    _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: token, body: #"{"done":true}"#)  // leaves
                    _ = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"listId":"inbox"}"#)  // enters
                    _ = try await h.request(.patch, "/v1/collections/tasks/task-b1", token: token, body: #"{"text":"edited"}"#)  // stays
                    _ = try await h.request(.patch, "/v1/collections/typed/typed1", token: token, body: #"{"x":1}"#)  // other collection
                    try await liveQuery.wait("three live query events") { documentEvents($0).count >= 5 }
                    let live = Array(documentEvents(await liveQuery.events).dropFirst(2))
                    #expect(live.map(\.event) == ["removed", "added", "changed"])
                    #expect(live.map { $0.json["id"] } == ["task-a1", "task-a2", "task-b1"])
                    #expect(live[1].json["fields"]?["listId"] == "inbox", "an entering document comes whole")
                    try await one.wait("the one document") { documentEvents($0).count >= 1 }
                    // A later change of that document is a fence: an event the filter let through
                    // by mistake (the other changes came first) would have reached the stream before it.
                    _ = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"fence":true}"#)
                    try await one.wait("the fence") { $0.contains { $0.json["fields"]?["fence"] == true } }
                    let seen = documentEvents(await one.events)
                    #expect(seen.map { $0.json["id"] } == ["task-a2", "task-a2"] && seen.last?.json["fields"]?["fence"] == true)
                }
            }
            expectError(try await h.request(.get, "/v1/events?selector=%7B%7D", token: token), .badRequest, "bad-request")
            expectError(try await h.request(.get, "/v1/events?collections=a,b&id=x", token: token), .badRequest, "bad-request")
            expectError(try await h.request(.get, "/v1/events", token: token, headers: [.init("Last-Event-ID")!: "soon"]), .badRequest, "bad-request")
            expectError(try await h.request(.get, "/v1/events"), .unauthorized, "no-session")
        }
    }

    @Test func aStreamCanHoldItsOwnSubscription() async throws {
        // A consumer that went away is noticed at the next write: the heartbeat bounds that.
        try await BridgeHarness.run(configure: { $0.heartbeatInterval = .milliseconds(200) }) { h in
            let (token, _) = try await h.session()
            let port = try #require(h.client.port)
            try await withEventStream(port: port, "/v1/events?subscribe=ticker&params=\(urlEncoded("[10,8]"))", token: token) { stream in
                // Ticks the ticker publishes together (it catches up when it wakes late) are one
                // consolidated change per document, so the stream may skip a value, never reorder.
                try await stream.wait("the last tick") { events in events.contains { $0.event == "changed" && $0.json["fields"]?["n"] == 8 } }
                let ticks = await stream.events.filter { $0.event == "changed" }.compactMap { $0.json["fields"]?["n"]?.intValue }
                #expect(ticks.last == 8 && ticks == ticks.sorted() && Set(ticks).count == ticks.count, "\(ticks)")
                #expect(try await h.request(.get, "/v1/subscriptions", token: token).json.arrayValue?.count == 1)
            }
            // Closing the stream releases its subscription (after the linger).
            try await h.waitUntil("the stream's subscription released", session: token, timeout: .seconds(5)) { $0.subscriptions.isEmpty }
            #expect(try await h.request(.get, "/v1/subscriptions", token: token).json.arrayValue?.count == 0)
            expectError(try await h.request(.get, "/v1/events?subscribe=nope", token: token), .notFound, 404)
        }
    }

    /// `curl -N '/v1/events?subscribe=…'` follows a publication from its start: the documents its
    /// subscription brings, and everything after. The stream attaches when the subscription is
    /// ready, so before, all of that happened before it and it showed nothing until the next
    /// change. A load larger than the session's log comes as a reset and a snapshot.
    @Test func aLiveStreamThatSubscribesSeesItsPublicationFromTheStart() async throws {
        for logSize in [10_000, 8] {
            try await BridgeHarness.run(configure: { $0.eventLogSize = logSize }) { h in
                let (token, _) = try await h.session()
                let port = try #require(h.client.port)
                try await withEventStream(port: port, "/v1/events?subscribe=bulk&params=%5B20%5D", token: token) { stream in
                    try await stream.wait("the 20 documents") { PublicFanoutTests.apply($0).count == 20 }
                    let events = await stream.events
                    if logSize == 8 {
                        #expect(events.first?.event == "reset" && events.contains { $0.event == "snapshot" }, "\(events.prefix(3).map(\.event))")
                    } else {
                        #expect(PublicFanoutTests.documentEvents(events).allSatisfy { $0.event == "added" })
                        #expect(events.contains { $0.event == "ready" }, "the subscription's ready event")
                    }
                    let rest = try await h.request(.get, "/v1/collections/bulk", token: token)
                    let restIDs = Set(rest["documents"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } ?? [])
                    #expect(Set(PublicFanoutTests.apply(events).keys) == restIDs && restIDs.count == 20)
                }
            }
        }
    }

    /// The delivery contract (DDPClientEventSink), through the public surface: streams that open
    /// with a snapshot while changes pour in each end with exactly the session's documents,
    /// without an impossible event (an add of a document held, a change or remove of one not held).
    @Test func streamsOpenedDuringAChangeStormNeitherMissNorDoubleAnEvent() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
            let port = try #require(h.client.port)
            let streams = 6
            let (opened, openedOne) = AsyncStream<Void>.makeStream()
            // The storm's writes so far: stream n opens after 5 n of them, so the streams open
            // one after another while the changes pour in.
            let written = LockedBox(0)
            let progress = ChangeSignal()
            let received = try await withThrowingTaskGroup(of: [SSEEvent].self) { group in
                for n in 0..<streams {
                    group.addTask {
                        try await progress.wait("the storm's first \(5 * n) writes", timeout: .seconds(30)) { written.value >= 5 * n }
                        return try await withEventStream(port: port, "/v1/events?collections=tasks&snapshot=true", token: token) { stream in
                            try await stream.wait("the snapshot") { $0.contains { $0.event == "snapshot" } }
                            openedOne.yield()
                            try await stream.wait("the last change", timeout: .seconds(30)) { events in
                                events.contains { $0.event == "changed" && $0.json["fields"]?["last"] == true }
                            }
                            return await stream.events
                        }
                    }
                }
                try await Self.storm(h, token: token, writes: 120, written: written, progress: progress, opened: opened, streams: streams)
                return try await group.reduce(into: [[SSEEvent]]()) { $0.append($1) }
            }
            let listed = try await h.request(.get, "/v1/collections/tasks", token: token)["documents"]?.arrayValue ?? []
            var truth: [String: EJSONObject] = [:]
            for document in listed {
                guard var fields = document.objectValue, let id = fields["_id"]?.stringValue else { continue }
                fields.removeValue(forKey: "_id")
                truth[id] = fields
            }
            #expect(truth["task-a1"]?["n"] == 120 && truth.count >= 3)
            #expect(received.count == streams)
            for (n, events) in received.enumerated() {
                let (documents, impossible) = Self.replay(events)
                #expect(impossible.isEmpty, "stream \(n): \(impossible)")
                #expect(documents == truth, "stream \(n) ends with the session's documents")
            }
        }
    }

    /// A storm of changes through a session: `writes` changes to `task-a1` (an insert every 10th,
    /// a removal of an earlier insert every 20th), each counted in `written` and signalled; then,
    /// once `streams` streams said they are open, the last change (`{"last":true}`).
    static func storm(
        _ h: BridgeHarness, token: String, writes: Int, written: LockedBox<Int>, progress: ChangeSignal, opened: AsyncStream<Void>,
        streams: Int
    ) async throws {
        for n in 1...writes {
            _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: token, body: #"{"n":\#(n)}"#)
            written.increment()
            progress.signal()
            if n % 10 == 0 {
                _ = try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"_id":"storm\#(n)","n":\#(n)}"#)
            }
            if n % 20 == 0 { _ = try await h.request(.delete, "/v1/collections/tasks/storm\(n - 10)", token: token) }
        }
        var count = 0
        for await _ in opened {
            count += 1
            if count == streams { break }
        }
        _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: token, body: #"{"last":true}"#)
    }

    /// The documents a stream's events leave, and the events that could not have come (an add of
    /// a document held, a change or removal of one not held).
    static func replay(_ events: [SSEEvent]) -> (documents: [String: EJSONObject], impossible: [String]) {
        var documents: [String: EJSONObject] = [:]
        var impossible: [String] = []
        for event in events {
            let id = event.json["id"]?.stringValue ?? ""
            switch event.event {
            case "reset": documents = [:]
            case "added":
                if documents[id] != nil { impossible.append("added \(id) twice") }
                documents[id] = event.json["fields"]?.objectValue ?? [:]
            case "changed":
                guard var document = documents[id] else {
                    impossible.append("changed \(id), not held")
                    continue
                }
                for field in event.json["fields"]?.objectValue ?? [:] { document[field.key] = field.value }
                for name in event.json["cleared"]?.arrayValue ?? [] { document.removeValue(forKey: name.stringValue ?? "") }
                documents[id] = document
            case "removed":
                if documents.removeValue(forKey: id) == nil { impossible.append("removed \(id), not held") }
            default: break
            }
        }
        return (documents, impossible)
    }

    @Test func resumeReplaysWhatWasMissedOrResets() async throws {
        try await BridgeHarness.run(configure: { $0.eventLogSize = 8 }) { h in
            let (token, _) = try await h.session()
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
            let port = try #require(h.client.port)
            let last = try await withEventStream(port: port, "/v1/events?collections=tasks", token: token) { stream in
                try await stream.waitUntilOpen()
                _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: token, body: #"{"n":1}"#)
                try await stream.wait("a change") { documentEvents($0).count >= 1 }
                return try #require(await stream.events.last?.id)
            }
            _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: token, body: #"{"n":2}"#)
            _ = try await h.request(.patch, "/v1/collections/tasks/task-b1", token: token, body: #"{"n":3}"#)
            try await withEventStream(port: port, "/v1/events?collections=tasks", token: token, headers: [("Last-Event-ID", last)]) { stream in
                try await stream.wait("the two missed changes") { documentEvents($0).count >= 2 }
                let missed = documentEvents(await stream.events)
                #expect(missed.map { $0.json["fields"]?["n"] } == [2, 3])
                #expect(!(await stream.events).contains { $0.event == "reset" })
            }
            // Too far behind for the log: reset, then a snapshot of the current state.
            for n in 4..<16 { _ = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"n":\#(n)}"#) }
            try await withEventStream(port: port, "/v1/events?collections=tasks&lastEventId=\(last)", token: token) { stream in
                try await stream.wait("reset and snapshot") { $0.contains { $0.event == "snapshot" } }
                let events = await stream.events
                #expect(events.first?.event == "reset")
                #expect(events.filter { $0.event == "added" }.count == 3)
                #expect(events.first { $0.json["id"] == "task-a2" }?.json["fields"]?["n"] == 15)
            }
        }
    }

    /// A session keyed by a Meteor login token is made again after it ends (idle expiry, a
    /// restart) with a new event log. A stream resuming with an id from the earlier life must get
    /// `reset` and a snapshot: with ids starting at 1 in every life, the new log had issued that id
    /// too, and the stream was replayed the new life's events instead — missing state silently.
    @Test func anEventIDFromAnEarlierLifeOfTheSessionMeansReset() async throws {
        try await BridgeHarness.run { h in
            let (_, loginToken) = try await LoggingTests.aliceSession(h)
            let port = try #require(h.client.port)
            _ = try await h.request(.post, "/v1/subscriptions", token: loginToken, body: #"{"name":"tasks"}"#)
            let last = try await withEventStream(port: port, "/v1/events?collections=tasks", token: loginToken) { stream in
                try await stream.waitUntilOpen()
                _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: loginToken, body: #"{"n":1}"#)
                try await stream.wait("a change") { documentEvents($0).count >= 1 }
                return try #require(await stream.events.last?.id)
            }
            // The session ends; the next request with the same Meteor token makes a new one.
            #expect(try await h.request(.delete, "/v1/session", token: loginToken).status == .noContent)
            _ = try await h.request(.post, "/v1/subscriptions", token: loginToken, body: #"{"name":"tasks"}"#)
            for n in 2..<30 { _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: loginToken, body: #"{"n":\#(n)}"#) }
            try await withEventStream(port: port, "/v1/events?collections=tasks", token: loginToken, headers: [("Last-Event-ID", last)]) { stream in
                try await stream.wait("reset and snapshot") { $0.contains { $0.event == "snapshot" } }
                let events = await stream.events
                #expect(events.first?.event == "reset", "resumed from \(last): \(events.prefix(3).map(\.event))")
                #expect(events.first { $0.json["id"] == "task-a1" }?.json["fields"]?["n"] == 29)
            }
        }
    }

    @Test func heartbeatsKeepIdleStreamsAlive() async throws {
        try await BridgeHarness.run(configure: { $0.heartbeatInterval = .milliseconds(150) }) { h in
            let (token, _) = try await h.session()
            try await withEventStream(port: try #require(h.client.port), "/v1/events", token: token) { stream in
                try await stream.waitForComments(beyond: 2)
                #expect(await stream.violations.isEmpty)
            }
        }
    }

    /// A stream's end is its connection's (the connection's event loop writes the stream, and no
    /// request loop is left to go on with): the last event, the response's end, then the close.
    @Test func aStreamsEndEndsItsResponseAndClosesItsConnection() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            let raw = try await RawConnection.open(port: try #require(h.client.port))
            try await raw.send("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n")
            #expect(try await raw.waitUntilReceived("retry:", count: 1, within: .seconds(5)) == 1)
            #expect(try await h.request(.delete, "/v1/session", token: token).status == .noContent)
            #expect(try await raw.waitUntilReceived("session-ended", count: 1, within: .seconds(5)) == 1)
            #expect(try await raw.waitUntilClosed(within: .seconds(5)), "the connection stayed open after its stream ended")
            #expect(await raw.received.hasSuffix("\r\n0\r\n\r\n"), "the chunked response was not ended before the close")
        }
    }

    /// Heavy (60,000 documents): run on its own by the test command (`DDP_BRIDGE_HEAVY_TESTS=1`),
    /// so its load does not disturb the timing of tests running beside it.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["DDP_BRIDGE_HEAVY_TESTS"] != nil))
    func aConsumerThatStopsReadingIsCutOffWithAReason() async throws {
        try await BridgeHarness.run(configure: { $0.streamBufferLimit = 64 << 10 }) { h in
            let (token, _) = try await h.session()
            let port = try #require(h.client.port)
            try await withEventStream(port: port, "/v1/events", token: token) { stream in
                try await stream.waitUntilOpen()
                await stream.pause()
                // Far more than the socket buffers and the stream's 64 KiB bound hold. The reader
                // reads again once the cut is counted: a reader cut while it reads nothing has its
                // connection closed 10 s later whether its last event went out or not, and loading
                // 60,000 documents can take longer than that.
                async let sub = h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"bulk","params":[60000],"timeout":60000}"#)
                try await eventually("the stream cut", timeout: .seconds(60)) { h.registry.endingStreams == 1 }
                await stream.resume()
                #expect(try await sub.status == .created)
                try await stream.waitUntilFinished()
                let last = try #require(await stream.events.last)
                #expect(last.event == "error")
                #expect(last.json["error"] == "slow-consumer")
                #expect(await stream.events.filter { $0.event == "added" }.count < 60_000, "the backlog was dropped, not kept")
            }
            // The session itself is fine and a new stream can catch up.
            #expect(try await h.request(.get, "/v1/collections/bulk?limit=0", token: token)["count"] == 60_000)
        }
    }

    @Test func reconnectsUpstreamAreQuiet() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"[{"name":"tasks"},{"name":"myTasks"}]"#)
            let port = try #require(h.client.port)
            let upstreamPort = try #require(await h.upstream.port)
            try await withEventStream(port: port, "/v1/events", token: token) { stream in
                // Down and back with nothing changed: connection events only.
                await h.upstream.stop()
                try await stream.wait("disconnected") { $0.contains { $0.event == "connection" && $0.json["state"] == "reconnecting" } }
                try await h.upstream.start(port: upstreamPort)
                try await stream.wait("connected again") { $0.filter { $0.event == "connection" && $0.json["state"] == "connected" }.count >= 1 }
                _ = try await h.request(.post, "/v1/methods/echo", token: token)
                // A write after the return is a fence: whatever the return emitted reached the
                // stream before it.
                _ = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"fence":1}"#)
                try await stream.wait("the first fence") { $0.contains { $0.json["fields"]?["fence"] == 1 } }
                #expect(
                    documentEvents(await stream.events).map(\.event) == ["changed"], "a reconnect that changed nothing emits no document events")

                // Down, changed while down, back: only the net difference.
                await h.upstream.stop()
                try await stream.wait("disconnected again") {
                    $0.filter { $0.event == "connection" && $0.json["state"] == "reconnecting" }.count >= 2
                }
                try await h.upstream.core.update("tasks", ["_id": "task-a1"], ["$set": ["done": true]])
                try await h.upstream.core.remove("tasks", ["_id": "task-b1"])
                try await h.upstream.start(port: upstreamPort)
                try await stream.wait("the net difference") { documentEvents($0).count >= 3 }
                _ = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: token, body: #"{"fence":2}"#)
                try await stream.wait("the second fence") { $0.contains { $0.json["fields"]?["fence"] == 2 } }
                // After the first fence: the net difference, then the second fence.
                let changes = Array(documentEvents(await stream.events).dropFirst())
                #expect(changes.map(\.event) == ["removed", "changed", "changed"])
                #expect(changes.map { $0.json["id"] } == ["task-b1", "task-a1", "task-a2"])
                #expect(changes.count == 3 && changes[1].json["fields"] == ["done": true])
            }
        }
    }

    @Test func streamsOfManySessionsShareTheirSessionsConnection() async throws {
        try await BridgeHarness.run { h in
            let port = try #require(h.client.port)
            let (alice, _) = try await h.session()
            let (bob, _) = try await h.session()
            for token in [alice, bob] { _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#) }
            try await withEventStream(port: port, "/v1/events?collections=tasks", token: alice) { a1 in
                try await withEventStream(port: port, "/v1/events", token: alice) { a2 in
                    try await withEventStream(port: port, "/v1/events?collections=tasks", token: bob) { b1 in
                        for stream in [a1, a2, b1] { try await stream.waitUntilOpen() }
                        #expect(h.registry.count == 2)
                        #expect(await h.upstream.core.connectionCount == 3, "one upstream connection per session, and the readiness probe")
                        _ = try await h.request(.patch, "/v1/collections/tasks/task-b1", token: bob, body: #"{"seen":true}"#)
                        for stream in [a1, a2, b1] {
                            try await stream.wait("the change") { documentEvents($0).contains { $0.json["id"] == "task-b1" } }
                        }
                    }
                }
            }
        }
    }

    @Test func aSessionHasAtMostItsStreamLimit() async throws {
        try await BridgeHarness.run(configure: { $0.maxStreamsPerSession = 1 }) { h in
            let (token, _) = try await h.session()
            let port = try #require(h.client.port)
            try await withEventStream(port: port, "/v1/events", token: token) { stream in
                try await stream.waitUntilOpen()
                expectError(try await h.request(.get, "/v1/events", token: token), .tooManyRequests, "too-many-streams")
            }
        }
    }

    @Test func endingTheSessionTellsItsStreams() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            try await withEventStream(port: try #require(h.client.port), "/v1/events", token: token) { stream in
                try await stream.waitUntilOpen()
                #expect(try await h.request(.delete, "/v1/session", token: token).status == .noContent)
                try await stream.waitUntilFinished()
                let text = await stream.bodyText
                #expect(await stream.events.last?.json["error"] == "session-ended", "\(text)")
            }
        }
    }
}
