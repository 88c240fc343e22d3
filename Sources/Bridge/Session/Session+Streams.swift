import DDP
import DDPClient
import HTTPTypes
import HashTreeCollections
import NIOCore
import Timing

extension Session {
    /// A comment line to every open stream, so proxies keep idle streams open (the registry
    /// calls this for all sessions: one task, rather than one per stream).
    func heartbeat() {
        state.withLock { state in
            for (feed, _) in state.feeds.values { feed.post(.heartbeat) }
        }
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

    /// Registers a stream; where its first frames come from (the log from a resume position, or
    /// versions of the cache's collections) is taken at one instant, so nothing is missed or
    /// doubled. Nothing is copied or matched here: the stream's writer reads the log or walks the
    /// documents as its socket takes them (``StreamPrelude``), off the client's actor.
    func attach(_ stream: EventStream, start: StreamStart) async throws(BridgeError) {
        try state.withLock { state throws(BridgeError) in try state.machine.admitStream(limit: limits.streams) }
        // The cache is read inside the client actor, where events are delivered (DDPClientEventSink):
        // the log and the cache agree, and the stream is registered before the next event.
        await client.withCache { cache in
            state.withLock { state in
                Session.flush(&state, now: runtime.clock.now)
                let log = state.machine.log
                let lastID = log.lastID
                let filter = stream.filter
                var prelude: StreamPrelude?
                switch start {
                case .live:
                    // A live query needs to know which documents are inside it before its first change.
                    if filter.selector != nil { prelude = StreamPrelude(head: [], walk: walk(cache, filter, emits: false)) }
                case .snapshot:
                    prelude = snapshot(cache, filter, id: lastID, reason: "A snapshot follows")
                case .resume(let after):
                    if filter.selector == nil, log.holds(after: after) {
                        if after < lastID { prelude = StreamPrelude(head: [], replay: replay(after: after, through: lastID)) }
                    } else {
                        let reason =
                            filter.selector == nil ? "Event \(after) is no longer in this session's log" : "A live query restarts from a snapshot"
                        prelude = snapshot(cache, filter, id: lastID, reason: reason)
                    }
                }
                register(stream, starting: prelude, in: &state)
            }
        }
    }

    /// Registers a stream whose start needs only the log (live changes without a live query, or
    /// a resume the log still holds) at once, under the session's lock, so a connection's event
    /// loop can open it without waiting on the client's actor. The log and the streams change
    /// together under that lock, so nothing is missed or doubled. `false`, with nothing
    /// registered, for any other start or when the session refuses the stream: ``attach(_:start:)``
    /// takes those.
    func attachFromLog(_ stream: EventStream, start: StreamStart) -> Bool {
        guard Self.mayAttachFromLog(stream.filter, start: start) else { return false }
        return state.withLock { state in
            Session.flush(&state, now: runtime.clock.now)
            let log = state.machine.log
            var prelude: StreamPrelude?
            switch start {
            case .live, .snapshot: break
            case .resume(let after):
                guard log.holds(after: after) else { return false }
                if after < log.lastID { prelude = StreamPrelude(head: [], replay: replay(after: after, through: log.lastID)) }
            }
            guard (try? state.machine.admitStream(limit: limits.streams)) != nil else { return false }
            register(stream, starting: prelude, in: &state)
            return true
        }
    }

    /// Whether a stream with `filter` starting at `start` may attach from the log alone: no live
    /// query (its first match reads the cache), no snapshot (the same). A resume may still find
    /// the log no longer holds its events (``attachFromLog(_:start:)`` says).
    static func mayAttachFromLog(_ filter: StreamFilter, start: StreamStart) -> Bool {
        guard filter.selector == nil else { return false }
        if case .snapshot = start { return false }
        return true
    }

    /// A stream admitted joins the session's streams and the feed of its loop, with what it
    /// starts with (under the lock: it takes every batch from the next on, and nothing before),
    /// whoever's session it is and whatever its filter: every stream is delivered one way
    /// (docs/ARCHITECTURE.md, "A loop's feed"); a live query's changes are matched there, on
    /// the reader's loop.
    func register(_ stream: EventStream, starting prelude: StreamPrelude?, in state: inout State) {
        // The login was lost since the stream was admitted: it gets the same last event.
        if let ending = state.machine.lostLoginEnding { stream.finish(with: ending) }
        let loop = ObjectIdentifier(stream.loop)
        let feed: LoopFeed
        if let held = state.feeds[loop] {
            feed = held.feed
            state.feeds[loop] = (feed, held.members + 1)
        } else {
            feed = LoopFeed(loop: stream.loop)
            state.feeds[loop] = (feed, 1)
        }
        feed.post(.join(stream, prelude))
        state.streams[ObjectIdentifier(stream)] = StreamEntry(stream: stream, feed: feed)
    }

    /// The log read a page at a time, under the session's lock (the writer holds no lock then).
    private func replay(after: UInt64, through: UInt64) -> StreamPrelude.Replay {
        StreamPrelude.Replay(after: after, through: through) { [weak self] after, through, maxBytes in
            self?.state.withLock { $0.machine.log.events(after: after, through: through, maxBytes: maxBytes) } ?? nil
        }
    }

    /// The documents a stream's filter may reach, as versions taken now (each O(1)).
    private func walk(_ cache: DocumentCache, _ filter: StreamFilter, emits: Bool) -> SnapshotWalk {
        var collections: [(name: String, documents: SnapshotWalk.Documents)] = []
        for name in cache.collections.keys.sorted() where filter.collections?.contains(name) ?? true {
            guard let documents = cache.collections[name]?.documents else { continue }
            if let id = filter.documentID {
                if let document = documents[id] { collections.append((name, [id: document])) }
            } else {
                collections.append((name, documents))
            }
        }
        return SnapshotWalk(
            collections: collections, filter: filter, emits: emits, limit: settings.queryTimeBudget, clock: runtime.clock)
    }

    /// `reset`, `added` for each matching document, then the `snapshot` marker — produced as the
    /// consumer reads. Only the marker carries an id (the log position the snapshot reflects): a
    /// consumer that drops halfway through has not moved its `Last-Event-ID`, so it gets the
    /// reset and the whole snapshot again.
    private func snapshot(_ cache: DocumentCache, _ filter: StreamFilter, id: UInt64, reason: String) -> StreamPrelude {
        StreamPrelude(
            head: [ByteBuffer(bytes: SSEFrame.encode(id: nil, event: "reset", data: ["reason": .string(reason)]))],
            walk: walk(cache, filter, emits: true), marker: id)
    }

    /// The session's events after `cursor`, oldest first, up to about `maxBytes` of frames, and
    /// the cursor to ask with next (MCP's `changes_since`); `nil` when the log no longer holds
    /// them all (or the cursor is not this session's): the caller reads the documents again. With
    /// no cursor: none, and the current one.
    func changes(after cursor: UInt64?, maxBytes: Int) -> (events: [SessionEvent], cursor: UInt64, more: Bool)? {
        state.withLock { state in
            Session.flush(&state, now: runtime.clock.now)
            let log = state.machine.log
            guard let cursor else { return ([], log.lastID, false) }
            guard let events = log.events(after: cursor, through: log.lastID, maxBytes: maxBytes) else { return nil }
            let reached = events.last?.id ?? cursor
            return (events, reached, reached < log.lastID)
        }
    }

    /// The id of the newest event in the session's log (pending changes flushed first): a stream
    /// that starts `.resume(after:)` it gets everything that happens in the session from now on.
    func logPosition() -> UInt64 {
        state.withLock { state in
            Session.flush(&state, now: runtime.clock.now)
            return state.machine.log.lastID
        }
    }

    func detach(_ stream: EventStream) {
        let id = ObjectIdentifier(stream)
        state.withLock { state in
            guard let entry = state.streams.removeValue(forKey: id) else { return }
            entry.feed.post(.leave(id))
            // A loop with no stream left loses its feed.
            let loop = ObjectIdentifier(entry.feed.loop)
            if let held = state.feeds[loop], held.feed === entry.feed {
                state.feeds[loop] = held.members > 1 ? (entry.feed, held.members - 1) : nil
            }
            state.machine.streamDetached(now: runtime.clock.now)
        }
    }

}

extension ConnectionState {
    /// Why the upstream is not usable now: the cause the last attempt ended with, kept through
    /// the attempt that follows it, `nil` once connected (for `/readyz` and 503 answers).
    func failure(previously: UpstreamFailure?) -> UpstreamFailure? {
        switch self {
        case .connected: nil
        case .reconnecting(_, _, let cause): cause
        case .idle, .connecting, .closed: previously
        }
    }

    /// The state's name, as `GET /v1/session`, `connection` events and the `Upstream-State`
    /// header say it.
    var name: String {
        switch self {
        case .idle, .connecting: "connecting"
        case .connected: "connected"
        case .reconnecting: "reconnecting"
        case .closed: "closed"
        }
    }

    /// As `GET /v1/session` and `connection` events report it.
    var ejson: EJSON {
        switch self {
        case .idle: return ["state": "connecting"]
        case .connecting(let attempt): return ["state": "connecting", "attempt": .int(attempt)]
        case .connected(let session, let version): return ["state": "connected", "ddpSession": .string(session), "version": .string(version)]
        case .reconnecting(let attempt, let delay, let cause):
            // Rounded to the nearest millisecond, where `wholeMilliseconds` truncates.
            var o: EJSONObject = ["state": "reconnecting", "attempt": .int(attempt), "retryIn": .number((delay.seconds * 1000).rounded())]
            if let cause { o["reason"] = .string(cause.message) }
            return .object(o)
        case .closed(let reason): return ["state": "closed", "reason": .string(reason)]
        }
    }
}
