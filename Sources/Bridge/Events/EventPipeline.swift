public import DDP

/// A session's event pipeline, without I/O: document changes are batched over a short window
/// and consolidated, every event gets the next id and goes into the bounded log. When traffic
/// is light a change goes out at once (the window only holds back what follows it closely).
public struct EventPipeline: Sendable {
    public let window: Duration
    public private(set) var log: EventLog
    private var batch = ChangeBatch()
    private var lastFlush: ContinuousClock.Instant?

    public init(window: Duration, logCapacity: Int, logByteLimit: Int = .max, firstEventID: UInt64 = 1) {
        self.window = window
        self.log = EventLog(capacity: logCapacity, byteLimit: logByteLimit, firstID: firstEventID)
    }

    /// When the pending batch must go out (`nil`: nothing pending).
    public func deadline(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard !batch.isEmpty else { return nil }
        return (lastFlush ?? now) + window
    }

    /// Document changes from upstream; returns the events to deliver now (possibly none, when batched).
    public mutating func documents(_ changes: [AppliedChange], now: ContinuousClock.Instant) -> [SessionEvent] {
        for change in changes { batch.add(change) }
        if let lastFlush, now - lastFlush < window { return [] }
        return flush(now: now)
    }

    /// Flushes the batch when its window is over.
    public mutating func flushIfDue(now: ContinuousClock.Instant) -> [SessionEvent] {
        guard let deadline = deadline(now: now), now >= deadline else { return [] }
        return flush(now: now)
    }

    /// Any other event: pending document changes go first, so nothing overtakes them.
    public mutating func event(_ kind: SessionEvent.Kind, _ payload: EJSON, now: ContinuousClock.Instant) -> [SessionEvent] {
        var out = batch.isEmpty ? [] : flush(now: now)
        out.append(log.append { SessionEvent(id: $0, kind: kind, payload: payload) })
        return out
    }

    /// Sends the batch out now (before a snapshot, so it and the log agree).
    public mutating func flush(now: ContinuousClock.Instant) -> [SessionEvent] {
        lastFlush = now
        let changes = batch.flush()
        guard !changes.isEmpty else { return [] }
        return changes.map { change in
            log.append { id in SessionEvent.document(change.change, document: change.document, id: id) }
        }
    }
}
