import DDP
import NIOCore

/// The last events of a session, with monotonic ids, bounded in count and in bytes: what a
/// stream that reconnects with `Last-Event-ID` is replayed from. An event's cost estimates the
/// memory it holds: its frame, the document version it keeps (48 bytes a field: the values
/// themselves are shared with the session's cache) and 128 bytes of bookkeeping; measured on a
/// ticker stream, ~670 bytes of RSS per 110-byte event, estimated 382. The newest event is
/// always kept, whatever its size.
public struct EventLog: Sendable {
    public let capacity: Int
    public let byteLimit: Int
    /// Kept events are `events[head...]`; the dropped prefix is compacted away now and then.
    private var events: [SessionEvent] = []
    private var head = 0
    public private(set) var bytes = 0
    /// The id the next event gets.
    public private(set) var nextID: UInt64

    /// `firstID` is the id of the log's first event (at least 1). A session's log starts at
    /// ``randomFirstID()``, so an id issued by an earlier life of the same session (one keyed by
    /// a Meteor login token is made again after an idle expiry or a restart) is never mistaken
    /// for one of this log's: it is older than the log or from its future, and either way the
    /// stream resuming with it gets `reset` and a snapshot, not silence.
    public init(capacity: Int, byteLimit: Int = .max, firstID: UInt64 = 1) {
        self.capacity = max(capacity, 1)
        self.byteLimit = max(byteLimit, 1)
        self.nextID = max(firstID, 1)
        // No reservation: most sessions log few events, and a reserved ring cost ~80 KiB each.
    }

    /// A first id drawn from [2^32, 2^52): far from any other life's ids (two lives overlap only
    /// with odds of about events issued ÷ 2^52), and exact as a JavaScript number.
    public static func randomFirstID() -> UInt64 {
        var generator = SystemRandomNumberGenerator()
        return UInt64.random(in: (1 << 32)..<(1 << 52), using: &generator)
    }

    public var lastID: UInt64 { nextID - 1 }
    public var count: Int { events.count - head }

    static func cost(_ event: SessionEvent) -> Int { 128 + event.frame.readableBytes + 48 * (event.document?.count ?? 0) }

    /// Appends an event made with the next id, dropping the oldest ones past the limits.
    @discardableResult
    public mutating func append(_ make: (UInt64) -> SessionEvent) -> SessionEvent {
        let event = make(nextID)
        nextID += 1
        events.append(event.withoutPayload)
        bytes += Self.cost(event)
        while count > 1 && (count > capacity || bytes > byteLimit) {
            bytes -= Self.cost(events[head])
            head += 1
        }
        if head >= 64 && head * 2 >= events.count {
            events.removeFirst(head)
            head = 0
        }
        return event
    }

    /// Whether a stream resuming after `id` can be replayed from the log: every event after it
    /// is still kept (and `id` is not from the future: another session, another process).
    public func holds(after id: UInt64) -> Bool {
        guard id <= lastID else { return false }
        let oldest = count == 0 ? nextID : events[head].id
        return id + 1 >= oldest
    }

    /// A page of a replay: the events after `id` up to `through` (inclusive), oldest first, up
    /// to about `maxBytes` of frames (at least one event); `nil` when some of them are no longer
    /// kept. A replay reads the log a page at a time, as its reader takes them: the frames are
    /// the log's own buffers, nothing is copied up front.
    public func events(after id: UInt64, through: UInt64, maxBytes: Int) -> [SessionEvent]? {
        guard holds(after: id) else { return nil }
        guard id < through, id < lastID else { return [] }
        let oldest = count == 0 ? nextID : events[head].id
        var position = head + Int(id + 1 - oldest)
        var out: [SessionEvent] = []
        var bytes = 0
        while position < events.count, events[position].id <= through, out.isEmpty || bytes < maxBytes {
            out.append(events[position])
            bytes += events[position].frame.readableBytes
            position += 1
        }
        return out
    }

    /// The events after `id`, oldest first; `nil` when some of them are no longer kept
    /// (or `id` is from the future: another session, another process).
    public func events(after id: UInt64) -> [SessionEvent]? {
        guard id <= lastID else { return nil }
        if id == lastID { return [] }
        let oldest = count == 0 ? nextID : events[head].id
        guard id + 1 >= oldest else { return nil }
        let skip = Int(id + 1 - oldest)
        return Array(events[(head + skip)...])
    }
}
