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
        var streamOpen = false
        var notes = Notes()
    }

    /// When each resource was last notified and which wait for their interval to end. Pure.
    struct Notes: Sendable {
        var lastSent: [String: ContinuousClock.Instant] = [:]
        var pending: Set<String> = []
        /// A flush is due (the stream's timer is set).
        var flushSet = false

        /// Of `uris` reached at `now`: those notified now, and when the others' flush is due
        /// (`nil`: none to set: none waits, or the timer is set already).
        mutating func reached(_ uris: [String], now: ContinuousClock.Instant, interval: Duration) -> (
            now: [String], flushAt: ContinuousClock.Instant?
        ) {
            var sent: [String] = []
            for uri in uris {
                if let last = lastSent[uri], now - last < interval {
                    pending.insert(uri)
                } else {
                    pending.remove(uri)
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
            for uri in pending.sorted() where lastSent[uri].map({ now - $0 >= interval }) ?? true {
                pending.remove(uri)
                lastSent[uri] = now
                sent.append(uri)
            }
            return (sent, setFlush(interval: interval))
        }

        private mutating func setFlush(interval: Duration) -> ContinuousClock.Instant? {
            guard !flushSet, let first = pending.compactMap({ lastSent[$0] }).min() else { return nil }
            flushSet = true
            return first + interval
        }

        mutating func forget(_ uri: String) {
            lastSent[uri] = nil
            pending.remove(uri)
        }
    }

    let interval: Duration
    private let watched = LockedState(Watched())

    init(interval: Duration = .seconds(1)) {
        self.interval = interval
    }

    /// Watches `uri` (again is fine); `false` past ``limit``.
    func add(_ uri: String, _ resource: MCPResource) -> Bool {
        watched.withLock { watched in
            guard watched.resources[uri] != nil || watched.resources.count < Self.limit else { return false }
            watched.resources[uri] = resource
            return true
        }
    }

    func remove(_ uri: String) {
        watched.withLock { watched in
            watched.resources[uri] = nil
            watched.notes.forget(uri)
        }
    }

    /// Takes the session's one server stream; `false` when it is open already.
    func openStream() -> Bool {
        watched.withLock { watched in
            defer { watched.streamOpen = true }
            return !watched.streamOpen
        }
    }

    func streamClosed() { watched.withLock { $0.streamOpen = false } }

    /// The stream's frames for one of the session's events at `now`: a notification per
    /// subscribed resource it reaches whose interval has passed (`nil`: none), and when the
    /// stream's timer must flush the others (`nil`: nothing to set).
    func frames(for event: SessionEvent, now: ContinuousClock.Instant) -> (frames: ByteBuffer?, flushAt: ContinuousClock.Instant?) {
        guard let collection = event.collection, let id = event.documentID else { return (nil, nil) }
        let (sent, flushAt) = watched.withLock { watched in
            watched.notes.reached(Self.reached(by: collection, id, in: watched.resources), now: now, interval: interval)
        }
        return (Self.frames(sent), flushAt)
    }

    /// The stream's timer: the waiting notifications whose interval has ended, and when to flush
    /// again.
    func flush(now: ContinuousClock.Instant) -> (frames: ByteBuffer?, flushAt: ContinuousClock.Instant?) {
        let (sent, flushAt) = watched.withLock { watched in
            // A resource unsubscribed meanwhile is not notified.
            let (sent, flushAt) = watched.notes.flush(now: now, interval: interval)
            return (sent.filter { watched.resources[$0] != nil }, flushAt)
        }
        return (Self.frames(sent), flushAt)
    }

    private static func frames(_ uris: [String]) -> ByteBuffer? {
        guard !uris.isEmpty else { return nil }
        var bytes: [UInt8] = []
        for uri in uris { bytes += updated(uri) }
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

    /// `notifications/resources/updated` for `uri`, as an SSE event (the transport's default
    /// `message` type).
    static func updated(_ uri: String) -> [UInt8] {
        let message = EJSONWriter.encode([
            "jsonrpc": "2.0", "method": "notifications/resources/updated", "params": ["uri": .string(uri)]
        ])
        return Array("data: ".utf8) + message + Array("\n\n".utf8)
    }
}
