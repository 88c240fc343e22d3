/// A sliding-window limit of events per key (a ``ClientKey``).
struct RateLimiter<Key: Hashable & Sendable>: Sendable {
    let calls: Int
    let interval: Duration
    private var events: [Key: [ContinuousClock.Instant]] = [:]

    init(calls: Int, interval: Duration) {
        self.calls = calls
        self.interval = interval
    }

    /// Records an event; returns the wait before the next one is allowed when over the limit.
    mutating func take(_ key: Key, now: ContinuousClock.Instant) -> Duration? {
        var recent = (events[key] ?? []).filter { now - $0 < interval }
        defer { events[key] = recent.isEmpty ? nil : recent }
        guard recent.count < calls else { return interval - (now - recent[0]) }
        recent.append(now)
        return nil
    }

    /// The wait before another event is allowed, without recording one (`nil`: allowed now).
    func wait(_ key: Key, now: ContinuousClock.Instant) -> Duration? {
        let recent = (events[key] ?? []).filter { now - $0 < interval }
        guard recent.count >= calls, let oldest = recent.first else { return nil }
        return interval - (now - oldest)
    }

    /// Records an event whatever the count (failures are counted even past the limit).
    mutating func record(_ key: Key, now: ContinuousClock.Instant) {
        var recent = (events[key] ?? []).filter { now - $0 < interval }
        recent.append(now)
        // Only the newest `calls` matter for the limit: memory per key stays bounded.
        if recent.count > calls { recent.removeFirst(recent.count - calls) }
        events[key] = recent
    }

    /// Forgets keys with no recent events (bounded memory).
    mutating func prune(now: ContinuousClock.Instant) {
        events = events.filter { _, times in times.contains { now - $0 < interval } }
    }
}
