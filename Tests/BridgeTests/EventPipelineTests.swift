import DDP
import HashTreeCollections
import NIOCore
import Testing
import Timing

@testable import Bridge

@Suite struct EventPipelineTests {

    @Test func batchesConsolidatePerDocument() {
        var cache = DocumentCache()
        var batch = ChangeBatch()
        _ = cache.apply(.added(collection: "c", id: "keep", fields: ["n": 1, "s": "x"]))
        for message: ServerMessage in [
            .added(collection: "c", id: "flash", fields: ["n": 1]),
            .changed(collection: "c", id: "keep", fields: ["n": 2], cleared: []),
            .removed(collection: "c", id: "flash"),
            .changed(collection: "c", id: "keep", fields: ["n": 1], cleared: ["s"]),
            .added(collection: "c", id: "new", fields: ["a": 1]),
            .changed(collection: "c", id: "new", fields: ["b": 2], cleared: ["a"])
        ] {
            if let applied = cache.apply(message) { batch.add(applied) }
        }
        let out = batch.flush().map(\.change)
        #expect(
            out == [
                .changed(collection: "c", id: "keep", fields: [:], cleared: ["s"], previous: ["s": "x"]),
                .added(collection: "c", id: "new", fields: ["b": 2])
            ], "added-then-removed and a field set back emit nothing")
        #expect(batch.isEmpty)
        // A document changed and changed back within one batch emits nothing at all.
        for message: ServerMessage in [
            .changed(collection: "c", id: "keep", fields: ["n": 5], cleared: []),
            .changed(collection: "c", id: "keep", fields: ["n": 1], cleared: [])
        ] {
            if let applied = cache.apply(message) { batch.add(applied) }
        }
        #expect(batch.flush().isEmpty)
    }

    /// The batch consolidates from the changes as the cache made them (tracking only the fields
    /// they touched), and must say exactly what the whole-document difference between the start
    /// and the end of the batch says.
    @Test(arguments: 0..<60)
    func aBatchSaysWhatTheNetDifferenceSays(seed: Int) {
        var random = SplitMix(seed: UInt64(seed) &+ 101)
        var cache = DocumentCache()
        for n in 0..<4 { _ = cache.apply(.added(collection: "c", id: "d\(n)", fields: ["a": .int(n), "b": 1, "c": 2])) }
        let start = cache
        var batch = ChangeBatch()
        for _ in 0..<(1 + random.next(12)) {
            let id = "d\(random.next(6))"
            let message: ServerMessage
            if cache.document("c", id) == nil {
                message = .added(collection: "c", id: id, fields: ["a": .int(random.next(3)), "e": .int(random.next(2))])
            } else {
                switch random.next(5) {
                case 0: message = .removed(collection: "c", id: id)
                case 1: message = .changed(collection: "c", id: id, fields: [:], cleared: ["b", "e"])
                default: message = .changed(collection: "c", id: id, fields: ["a": .int(random.next(3)), "f": .int(random.next(2))], cleared: [])
                }
            }
            if let applied = cache.apply(message) { batch.add(applied) }
        }
        func normalized(_ change: DocumentChange) -> DocumentChange {
            guard case .changed(let c, let id, let fields, let cleared, let previous) = change else { return change }
            return .changed(collection: c, id: id, fields: fields, cleared: cleared.sorted(), previous: previous)
        }
        let flushed = batch.flush()
        let expected = DocumentCache.difference(from: start, to: cache).map { normalized($0.change) }
        #expect(flushed.count == expected.count, "seed \(seed)")
        for change in expected {
            #expect(flushed.contains { normalized($0.change) == change }, "seed \(seed): \(change)")
        }
        for (change, document) in flushed {
            #expect(document == cache.document(change.collection, change.id), "seed \(seed): the document after")
        }
    }

    @Test func theLogReplaysWhatItStillHolds() {
        var log = EventLog(capacity: 3)
        for _ in 0..<5 { log.append { SessionEvent(id: $0, kind: .user, payload: nil) } }
        #expect(log.lastID == 5)
        #expect(log.events(after: 5)?.isEmpty == true)
        #expect(log.events(after: 2)?.map(\.id) == [3, 4, 5])
        #expect(log.events(after: 1) == nil, "event 2 is gone")
        #expect(log.events(after: 9) == nil, "an id from the future")
    }

    @Test func aLogStartingAtARandomIDKnowsOnlyItsOwnIDs() {
        let first = EventLog.randomFirstID()
        #expect(first >= 1 << 32 && first < 1 << 52)
        var log = EventLog(capacity: 10, firstID: first)
        #expect(log.events(after: first - 1)?.isEmpty == true, "a fresh log: nothing after its start")
        #expect(log.events(after: 5) == nil, "an id from an earlier life starting at 1")
        for _ in 0..<3 { log.append { SessionEvent(id: $0, kind: .user, payload: nil) } }
        #expect(log.events(after: first)?.map(\.id) == [first + 1, first + 2])
        #expect(log.events(after: first + 9) == nil, "an id from the future")
    }

    @Test func theLogIsBoundedInBytesAndKeepsTheNewestEventWhateverItsSize() {
        var log = EventLog(capacity: 1_000, byteLimit: 1_000)
        for _ in 0..<100 { log.append { SessionEvent(id: $0, kind: .user, payload: .string(String(repeating: "x", count: 80))) } }
        #expect(log.bytes <= 1_000 && log.count >= 3, "\(log.bytes) bytes in \(log.count) events")
        #expect(log.events(after: log.lastID - UInt64(log.count))?.count == log.count)
        #expect(log.events(after: log.lastID - UInt64(log.count) - 1) == nil, "the one before is gone")
        log.append { SessionEvent(id: $0, kind: .user, payload: .string(String(repeating: "y", count: 5_000))) }
        #expect(log.count == 1 && log.events(after: log.lastID - 1)?.map(\.id) == [101])
    }

    @Test func lightTrafficGoesOutAtOnceAndBurstsAreBatched() {
        var hub = EventPipeline(window: .milliseconds(5), logCapacity: 100)
        var cache = DocumentCache()
        let t0 = ContinuousClock.now
        let c1 = cache.apply(.added(collection: "c", id: "a", fields: ["n": 0]))!
        #expect(hub.documents([c1], now: t0).map(\.kind) == [.added], "nothing pending: no delay")
        var held: [SessionEvent] = []
        for n in 1...3 {
            let c = cache.apply(.changed(collection: "c", id: "a", fields: ["n": .int(n)], cleared: []))!
            held += hub.documents([c], now: t0 + .milliseconds(n))
        }
        #expect(held.isEmpty)
        #expect(hub.deadline(now: t0 + .milliseconds(3)) == t0 + .milliseconds(5))
        #expect(hub.flushIfDue(now: t0 + .milliseconds(4)).isEmpty)
        let flushed = hub.flushIfDue(now: t0 + .milliseconds(5))
        #expect(flushed.count == 1)
        #expect(flushed.first?.payload["fields"] == ["n": 3] && flushed.first?.payload["previous"] == ["n": 0])
        // Another kind of event never overtakes pending changes.
        let c5 = cache.apply(.changed(collection: "c", id: "a", fields: ["n": 9], cleared: []))!
        _ = hub.documents([c5], now: t0 + .milliseconds(6))
        #expect(hub.event(.user, ["userId": nil], now: t0 + .milliseconds(7)).map(\.kind) == [.changed, .user])
        #expect(hub.log.events(after: 0)?.map(\.id) == [1, 2, 3, 4])
    }

    @Test func sseFramesAreWellFormed() {
        let frame = String(decoding: SSEFrame.encode(id: 7, event: "changed", data: ["text": "two\nlines"]), as: UTF8.self)
        #expect(frame == "id: 7\nevent: changed\ndata: {\"text\":\"two\\nlines\"}\n\n")
    }

    /// A snapshot on the wire: `reset`, an `added` per document without an id, then the marker
    /// with the log position.
    @Test func snapshotFramesAreWhatTheClientReads() {
        let documents: TreeDictionary<String, EJSONObject> = ["a1": ["title": "x", "n": 1], "~7": [:]]
        let walk = SnapshotWalk(collections: [("tasks", documents)], filter: StreamFilter(), emits: true, limit: .seconds(1), clock: .system)
        var prelude = StreamPrelude(
            head: [ByteBuffer(bytes: SSEFrame.encode(id: nil, event: "reset", data: ["reason": "resume-too-old"]))], walk: walk, marker: 9)
        var frames: [String] = []
        while case .frames(let out) = prelude.next(budget: .max, slice: .seconds(1), filter: StreamFilter()) {
            frames += out.map { String(buffer: $0) }
        }
        #expect(frames.first == "event: reset\ndata: {\"reason\":\"resume-too-old\"}\n\n")
        #expect(frames.last == "id: 9\nevent: snapshot\ndata: {\"count\":2}\n\n")
        // The walk's order is the map's own: the documents in any order.
        #expect(
            Set(frames.dropFirst().dropLast()) == [
                "event: added\ndata: {\"collection\":\"tasks\",\"id\":\"a1\",\"fields\":{\"title\":\"x\",\"n\":1}}\n\n",
                "event: added\ndata: {\"collection\":\"tasks\",\"id\":7,\"fields\":{}}\n\n"
            ])
        #expect(frames.count == 4)
        guard case .done = prelude.next(budget: .max, slice: .seconds(1), filter: StreamFilter()) else {
            Issue.record("the prelude goes on after its marker")
            return
        }
    }

    /// A consumer that applies what it receives ends with exactly the session's documents,
    /// whatever the changes and whenever it drops and resumes.
    @Test(arguments: 0..<40)
    func consumersNeverMissState(seed: Int) throws {
        var random = SplitMix(seed: UInt64(seed) &+ 1)
        var truth = DocumentCache()
        var hub = EventPipeline(window: .milliseconds(2), logCapacity: 25)
        var consumer = Consumer()
        var now = ContinuousClock.now
        consumer.connect(hub: &hub, truth: truth, now: now)
        for _ in 0..<400 {
            now = now + .microseconds(Int64(random.next(1_500)))
            switch random.next(100) {
            case 0..<6:
                consumer.connected = false
            case 6..<12 where !consumer.connected:
                consumer.connect(hub: &hub, truth: truth, now: now)
            case 12..<20:
                consumer.receive(hub.flushIfDue(now: now))
            default:
                let id = "d\(random.next(8))"
                let message: ServerMessage
                if truth.document("c", id) == nil {
                    message = .added(collection: "c", id: id, fields: ["n": .int(random.next(3)), "k": .int(random.next(2))])
                } else if random.next(4) == 0 {
                    message = .removed(collection: "c", id: id)
                } else {
                    message =
                        random.next(3) == 0
                        ? .changed(collection: "c", id: id, fields: [:], cleared: ["k"])
                        : .changed(collection: "c", id: id, fields: ["n": .int(random.next(3))], cleared: [])
                }
                guard let change = truth.apply(message) else { continue }
                consumer.receive(hub.documents([change], now: now))
            }
            try #require(consumer.consistent, "seed \(seed): the consumer received an impossible event")
        }
        now = now + .seconds(1)
        consumer.receive(hub.flushIfDue(now: now))
        if !consumer.connected { consumer.connect(hub: &hub, truth: truth, now: now) }
        #expect(consumer.documents == Consumer.plain(truth.collections["c"]?.documents), "seed \(seed)")
    }
}

/// A stream consumer as a client would write one: applies events, remembers the last id.
struct Consumer {
    var documents: [String: EJSONObject] = [:]
    var lastID: UInt64 = 0
    var connected = false
    var consistent = true

    static func plain(_ documents: TreeDictionary<String, EJSONObject>?) -> [String: EJSONObject] {
        Dictionary(uniqueKeysWithValues: (documents ?? [:]).map { ($0.key, $0.value) })
    }

    mutating func connect(hub: inout EventPipeline, truth: DocumentCache, now: ContinuousClock.Instant) {
        connected = true
        _ = hub.flush(now: now)  // as Session.attach does, before reading the log and the cache
        if let missed = hub.log.events(after: lastID) {
            apply(missed)
        } else {
            // reset + snapshot
            documents = Self.plain(truth.collections["c"]?.documents)
            lastID = hub.log.lastID
        }
    }

    mutating func receive(_ events: [SessionEvent]) {
        guard connected else { return }
        apply(events)
    }

    mutating func apply(_ events: [SessionEvent]) {
        for event in events {
            lastID = event.id
            guard let id = event.documentID else { continue }
            // What a client reads: the frame's `data:` line (replayed events keep no payload tree).
            let text = String(buffer: event.frame)
            let data = text.split(separator: "\n").first { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) } ?? "null"
            let payload = (try? EJSONParser.parse(data)) ?? .null
            switch event.kind {
            case .added:
                if documents[id] != nil { consistent = false }
                documents[id] = payload["fields"]?.objectValue
            case .changed:
                guard var document = documents[id] else {
                    consistent = false
                    continue
                }
                for field in payload["fields"]?.objectValue ?? [:] { document[field.key] = field.value }
                for key in payload["cleared"]?.arrayValue ?? [] { document.removeValue(forKey: key.stringValue ?? "") }
                documents[id] = document
            case .removed:
                if documents.removeValue(forKey: id) == nil { consistent = false }
            default:
                break
            }
        }
    }
}

/// A small seeded generator, so every failing case can be replayed.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int(z % UInt64(bound))
    }
}
