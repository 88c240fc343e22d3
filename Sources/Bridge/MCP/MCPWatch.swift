import DDP
import NIOCore

/// The resources an MCP session has subscribed to (`resources/subscribe`), and what its server
/// stream (`GET /mcp`) makes of the user's session's changes: a
/// `notifications/resources/updated` for each subscribed resource a change reaches. A document
/// resource is reached by a change of that document; a query resource by any change in its
/// collection (the agent reads it again to see whether its answer moved). The stream is an
/// ``EventStream`` of the user's session like any other (its bounds, its loop's feed, its
/// heartbeats); this is its filter and its framing.
///
/// Notifications are coalesced: at most one per resource per `interval`
/// (`--mcp-notify-interval`). A change that comes sooner is noted, and the resource's one
/// notification for it goes out when the interval ends (the stream's timer,
/// ``EventStream``): an agent hears of the last change, not of each.
final class MCPWatch: Sendable {
    /// The most resources one session may watch.
    static let limit = 100

    private struct Watched: Sendable {
        var resources: [String: MCPResource] = [:]
        /// How many documents of each collection the session holds, from when the stream
        /// opened on by its changes: a collection's first document, or its last one gone, is
        /// `notifications/resources/list_changed`.
        var collections: [String: Int] = [:]
        /// Ends the open server stream (its MCP session ended); `nil`: none is open.
        var endStream: (@Sendable () -> Void)?
        var notes = Notes()
        /// The session ended: nothing more is watched, and what was charged went back.
        var ended = false
    }

    /// What watching `uri` costs the memory budget: its resource (the URI, and a query's parsed
    /// selector, sort and fields, a few times the URI's size at most) and its notes.
    static func cost(of uri: String) -> Int { 256 + 4 * uri.utf8.count }

    enum Added: Equatable {
        case added
        /// Watched already: nothing new to charge.
        case present
        /// Past ``limit``, or the session ended.
        case refused
    }

    /// When each resource was last notified, which wait for their interval to end (with the
    /// oldest session event each waits for), and the id the stream's frames carry: the newest
    /// session event every change up to which has been notified, so a stream resumed after it
    /// (`Last-Event-ID`) misses nothing. Pure.
    struct Notes: Sendable {
        var lastSent: [String: ContinuousClock.Instant] = [:]
        var pending: [String: UInt64] = [:]
        /// The newest session event seen.
        var newest: UInt64 = 0
        /// A flush is due (the stream's timer is set).
        var flushSet = false

        /// The id the frames sent now carry.
        var covered: UInt64 { pending.values.min().map { max($0, 1) - 1 } ?? newest }

        /// Of `uris` reached by the session event `event` at `now`: those notified now, and when
        /// the others' flush is due (`nil`: none to set: none waits, or the timer is set already).
        mutating func reached(_ uris: [String], by event: UInt64, now: ContinuousClock.Instant, interval: Duration) -> (
            now: [String], flushAt: ContinuousClock.Instant?
        ) {
            newest = max(newest, event)
            var sent: [String] = []
            for uri in uris {
                if let last = lastSent[uri], now - last < interval {
                    if pending[uri] == nil { pending[uri] = event }
                } else {
                    pending[uri] = nil
                    lastSent[uri] = now
                    sent.append(uri)
                }
            }
            return (sent, setFlush(interval: interval))
        }

        /// The flush: the waiting resources whose interval has ended go out now; the timer is set
        /// again for the others.
        mutating func flush(now: ContinuousClock.Instant, interval: Duration) -> (now: [String], flushAt: ContinuousClock.Instant?) {
            flushSet = false
            var sent: [String] = []
            for uri in pending.keys.sorted() where lastSent[uri].map({ now - $0 >= interval }) ?? true {
                pending[uri] = nil
                lastSent[uri] = now
                sent.append(uri)
            }
            return (sent, setFlush(interval: interval))
        }

        private mutating func setFlush(interval: Duration) -> ContinuousClock.Instant? {
            guard !flushSet, let first = pending.keys.compactMap({ lastSent[$0] }).min() else { return nil }
            flushSet = true
            return first + interval
        }

        mutating func forget(_ uri: String) {
            lastSent[uri] = nil
            pending[uri] = nil
        }
    }

    let interval: Duration
    private let watched = LockedState(Watched())

    init(interval: Duration = .seconds(1)) {
        self.interval = interval
    }

    /// Watches `uri`, at ``cost(of:)`` (charged by the caller first, who gives it back unless it
    /// was ``Added/added``).
    func add(_ uri: String, _ resource: MCPResource) -> Added {
        watched.withLock { watched in
            guard !watched.ended else { return .refused }
            guard watched.resources[uri] == nil else { return .present }
            guard watched.resources.count < Self.limit else { return .refused }
            watched.resources[uri] = resource
            return .added
        }
    }

    /// Stops watching `uri`; what it was charged, to give back (0 if it was not watched).
    func remove(_ uri: String) -> Int {
        watched.withLock { watched in
            watched.notes.forget(uri)
            return watched.resources.removeValue(forKey: uri) == nil ? 0 : Self.cost(of: uri)
        }
    }

    /// The session ended: nothing more is watched; what the resources were charged, to give back.
    func release() -> Int {
        watched.withLock { watched in
            watched.ended = true
            defer { watched.resources = [:] }
            return watched.resources.keys.reduce(0) { $0 + Self.cost(of: $1) }
        }
    }

    /// Takes the session's one server stream, with what ends it; `false` when one is open
    /// already. Notifications held for a stream that went are not for this one (a client that
    /// resumes gets what it missed from the log instead).
    func openStream(collections: [String: Int] = [:], ending: @escaping @Sendable () -> Void) -> Bool {
        watched.withLock { watched in
            guard watched.endStream == nil else { return false }
            watched.endStream = ending
            watched.collections = collections
            watched.notes.pending = [:]
            watched.notes.flushSet = false
            return true
        }
    }

    func streamClosed() { watched.withLock { $0.endStream = nil } }

    /// Whether the server stream is open (an MCP session that listens is in use).
    var isStreamOpen: Bool { watched.withLock { $0.endStream != nil } }

    /// The MCP session ended: its server stream ends too.
    func end() { watched.withLock { $0.endStream }?() }

    /// The stream's timer went without flushing (its stream ended): the next stream sets its own.
    func flushDropped() { watched.withLock { $0.notes.flushSet = false } }

    /// The stream's frames for one of the session's events at `now`: a notification per
    /// subscribed resource it reaches whose interval has passed (`nil`: none), and when the
    /// stream's timer must flush the others (`nil`: nothing to set).
    func frames(for event: SessionEvent, now: ContinuousClock.Instant) -> (frames: ByteBuffer?, flushAt: ContinuousClock.Instant?) {
        guard let collection = event.collection, let id = event.documentID else { return (nil, nil) }
        let (sent, covered, flushAt, newCollection) = watched.withLock { watched in
            let (sent, flushAt) = watched.notes.reached(
                Self.reached(by: collection, id, in: watched.resources), by: event.id, now: now, interval: interval)
            var listChanged = false
            switch event.kind {
            case .added:
                listChanged = watched.collections[collection, default: 0] == 0
                watched.collections[collection, default: 0] += 1
            case .removed:
                let left = max(0, watched.collections[collection, default: 0] - 1)
                listChanged = left == 0 && watched.collections[collection] != nil
                watched.collections[collection] = left == 0 ? nil : left
            default:
                break
            }
            return (sent, watched.notes.covered, flushAt, listChanged)
        }
        guard newCollection else { return (Self.frames(sent, id: covered), flushAt) }
        // A collection's first document, or its last one gone: the resource list changed.
        var bytes = Self.listChanged
        if let frames = Self.frames(sent, id: covered) { bytes += Array(frames.readableBytesView) }
        return (ByteBuffer(bytes: bytes), flushAt)
    }

    /// The stream's timer: the waiting notifications whose interval has ended, and when to flush
    /// again.
    func flush(now: ContinuousClock.Instant) -> (frames: ByteBuffer?, flushAt: ContinuousClock.Instant?) {
        let (sent, covered, flushAt) = watched.withLock { watched in
            // (A resource unsubscribed meanwhile is not among them: ``remove(_:)`` forgets it.)
            let (sent, flushAt) = watched.notes.flush(now: now, interval: interval)
            return (sent, watched.notes.covered, flushAt)
        }
        return (Self.frames(sent, id: covered), flushAt)
    }

    /// What a stream resumed after `Last-Event-ID` starts with: a notification for each
    /// subscribed resource one of `events` (the session's, after that id) reaches, once; for
    /// every subscribed resource when the log no longer holds them (`events` `nil`). Its id is
    /// `through`, the log's position the replay reached.
    func replay(_ events: [SessionEvent]?, through: UInt64) -> ByteBuffer? {
        let uris = watched.withLock { watched in
            watched.notes.newest = max(watched.notes.newest, through)
            guard let events else { return watched.resources.keys.sorted() }
            var reached: Set<String> = []
            for event in events {
                guard let collection = event.collection, let id = event.documentID else { continue }
                reached.formUnion(Self.reached(by: collection, id, in: watched.resources))
            }
            return reached.sorted()
        }
        return Self.frames(uris, id: through)
    }

    private static func frames(_ uris: [String], id: UInt64) -> ByteBuffer? {
        guard !uris.isEmpty else { return nil }
        var bytes: [UInt8] = []
        for uri in uris { bytes += updated(uri, id: id) }
        return ByteBuffer(bytes: bytes)
    }

    /// The subscribed resources a change of the document `id` of `collection` reaches, in URI
    /// order. Pure.
    static func reached(by collection: String, _ id: String, in resources: [String: MCPResource]) -> [String] {
        resources.compactMap { uri, resource -> String? in
            switch resource {
            case .document(let c, let documentID): c == collection && documentID.wire == id ? uri : nil
            case .query(let c, _): c == collection ? uri : nil
            }
        }.sorted()
    }

    /// `notifications/resources/list_changed`, as an SSE event (no id: it stands for no event of
    /// the log that a resume could miss; `resources/list` answers the list as it is).
    static let listChanged: [UInt8] =
        Array("data: ".utf8) + EJSONWriter.encode(["jsonrpc": "2.0", "method": "notifications/resources/list_changed"]) + Array("\n\n".utf8)

    /// `notifications/resources/updated` for `uri`, as an SSE event (the transport's default
    /// `message` type) with the stream's id.
    static func updated(_ uri: String, id: UInt64) -> [UInt8] {
        let message = EJSONWriter.encode([
            "jsonrpc": "2.0", "method": "notifications/resources/updated", "params": ["uri": .string(uri)]
        ])
        return Array("id: \(id)\ndata: ".utf8) + message + Array("\n\n".utf8)
    }
}
