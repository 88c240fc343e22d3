import DDP
import DDPClient
import HTTPTypes
import NIOCore

extension Session {
    /// A comment line to every open stream, so proxies keep idle streams open (the registry
    /// calls this for all sessions: one task, rather than one per stream).
    func heartbeat() {
        let streams = state.withLock { Array($0.streams.values) }
        var wakeups = Wakeups()
        for stream in streams { stream.enqueue(SSEFrame.heartbeatBuffer, into: &wakeups) }
        wakeups.ring()
    }

    /// Where a new stream starts.
    enum StreamStart: Sendable {
        /// Live changes only.
        case live
        /// A snapshot of the matching documents, a `snapshot` marker, then live changes.
        case snapshot
        /// What was missed since this event id; a `reset` and a snapshot when that is no longer kept.
        case resume(after: UInt64)

        var isLive: Bool {
            if case .live = self { return true }
            return false
        }
    }

    /// Registers a stream; its first frames (replay, or reset and snapshot) are taken from the log
    /// and the cache at one instant, so nothing is missed or doubled.
    func attach(_ stream: EventStream, start: StreamStart) async throws(BridgeError) {
        try state.withLock { state throws(BridgeError) in try state.machine.admitStream(limit: configuration.maxStreamsPerSession) }
        // The cache is read inside the client actor, where events are delivered (DDPClientEventSink):
        // the log and the cache agree, and the stream is registered before the next event.
        await client.withCache { cache in
            state.withLock { state in
                Session.flush(&state, now: configuration.clock.now)
                let lastID = state.machine.pipeline.log.lastID
                var replay: [SessionEvent]?
                if case .resume(let after) = start, stream.filter.selector == nil { replay = state.machine.pipeline.log.events(after: after) }
                // Only a stream that needs the matching documents scans for them: a live stream
                // without a live query (the public fan-out's many readers) or a replay costs O(1).
                var matching: [(collection: String, id: String, document: EJSONObject)] = []
                if stream.filter.selector != nil || replay == nil, !(start.isLive && stream.filter.selector == nil) {
                    matching = Self.matchingDocuments(cache, stream.filter)
                }
                if stream.filter.selector != nil { stream.setMatching(Set(matching.map(\.id))) }
                var prelude: EventStream.Prelude?
                switch start {
                case .live:
                    break
                case .snapshot:
                    prelude = Self.snapshot(matching, id: lastID, reason: "A snapshot follows")
                case .resume(let after):
                    if let replay {
                        var frames: [ByteBuffer] = []
                        for event in replay {
                            if let c = event.collection, let id = event.documentID, !stream.filter.admits(collection: c, id: id) { continue }
                            frames.append(event.frame)
                        }
                        prelude = EventStream.Prelude(head: frames, documents: [], tail: [])
                    } else {
                        let reason =
                            stream.filter.selector == nil
                            ? "Event \(after) is no longer in this session's log" : "A live query restarts from a snapshot"
                        prelude = Self.snapshot(matching, id: lastID, reason: reason)
                    }
                }
                if let prelude { stream.start(with: prelude) }
                state.streams[state.nextStream] = stream
                state.nextStream += 1
            }
        }
    }

    /// The id of the newest event in the session's log (pending changes flushed first): a stream
    /// that starts `.resume(after:)` it gets everything that happens in the session from now on.
    func logPosition() -> UInt64 {
        state.withLock { state in
            Session.flush(&state, now: configuration.clock.now)
            return state.machine.pipeline.log.lastID
        }
    }

    func detach(_ stream: EventStream) {
        state.withLock { state in
            guard let key = state.streams.first(where: { $0.value === stream })?.key else { return }
            state.streams[key] = nil
            state.machine.streamDetached(now: configuration.clock.now)
        }
    }

    static func matchingDocuments(_ cache: DocumentCache, _ filter: StreamFilter) -> [(collection: String, id: String, document: EJSONObject)] {
        var out: [(collection: String, id: String, document: EJSONObject)] = []
        for name in cache.collections.keys.sorted() where filter.collections?.contains(name) ?? true {
            let documents = cache.collections[name]!.documents
            if let id = filter.documentID {
                if let document = documents[id], filter.matches(collection: name, id: id, document: document) { out.append((name, id, document)) }
                continue
            }
            for id in documents.keys.sorted() where filter.matches(collection: name, id: id, document: documents[id]!) {
                out.append((name, id, documents[id]!))
            }
        }
        return out
    }

    /// `reset`, `added` for each document, then the `snapshot` marker — written as the consumer
    /// reads (``EventStream/Prelude``). Only the marker carries an id (the log position the
    /// snapshot reflects): a consumer that drops halfway through has not moved its
    /// `Last-Event-ID`, so it gets the reset and the whole snapshot again.
    static func snapshot(_ documents: [(collection: String, id: String, document: EJSONObject)], id: UInt64, reason: String) -> EventStream.Prelude {
        EventStream.Prelude(
            head: [ByteBuffer(bytes: SSEFrame.encode(id: nil, event: "reset", data: ["reason": .string(reason)]))],
            documents: documents[...],
            tail: [ByteBuffer(bytes: SSEFrame.encode(id: id, event: "snapshot", data: ["count": .int(documents.count)]))])
    }
}

extension ConnectionState {
    /// Why the upstream is not usable now: the reason the last attempt ended, kept through the
    /// attempt that follows it, `nil` once connected (for `/readyz` and 503 answers).
    func failure(previously: String?) -> String? {
        switch self {
        case .connected: nil
        case .reconnecting(_, _, let reason): reason
        case .closed(let reason): reason
        case .idle, .connecting: previously
        }
    }

    /// As `GET /v1/session` and `connection` events report it.
    var ejson: EJSON {
        switch self {
        case .idle: return ["state": "connecting"]
        case .connecting(let attempt): return ["state": "connecting", "attempt": .int(attempt)]
        case .connected(let session, let version): return ["state": "connected", "ddpSession": .string(session), "version": .string(version)]
        case .reconnecting(let attempt, let delay, let reason):
            // Rounded to the nearest millisecond, where `wholeMilliseconds` truncates.
            var o: EJSONObject = ["state": "reconnecting", "attempt": .int(attempt), "retryIn": .number((delay.seconds * 1000).rounded())]
            if let reason { o["reason"] = .string(reason) }
            return .object(o)
        case .closed(let reason): return ["state": "closed", "reason": .string(reason)]
        }
    }
}
