/// The last events of a session, with monotonic ids, bounded in count: what a stream that
/// reconnects with `Last-Event-ID` is replayed from.
public struct EventLog: Sendable {
    public let capacity: Int
    private var ring: [SessionEvent] = []
    private var start = 0
    /// The id the next event gets; ids start at 1.
    public private(set) var nextID: UInt64 = 1

    public init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        // No reservation: most sessions log few events, and a reserved ring cost ~80 KiB each.
    }

    public var lastID: UInt64 { nextID - 1 }

    /// Appends an event made with the next id.
    @discardableResult
    public mutating func append(_ make: (UInt64) -> SessionEvent) -> SessionEvent {
        let event = make(nextID)
        nextID += 1
        if ring.count < capacity {
            ring.append(event)
        } else {
            ring[start] = event
            start = (start + 1) % capacity
        }
        return event
    }

    /// The events after `id`, oldest first; `nil` when some of them are no longer kept
    /// (or `id` is from the future: another session, another process).
    public func events(after id: UInt64) -> [SessionEvent]? {
        guard id <= lastID else { return nil }
        if id == lastID { return [] }
        let oldest = ring.isEmpty ? nextID : ring[start].id
        guard id + 1 >= oldest else { return nil }
        let skip = Int(id + 1 - oldest)
        var out: [SessionEvent] = []
        out.reserveCapacity(ring.count - skip)
        for i in skip..<ring.count { out.append(ring[(start + i) % ring.count]) }
        return out
    }
}
