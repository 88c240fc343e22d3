import DDP

/// Runs `send(n)` for n = 1…`count` at `rate` a second from now, as a ticker does: what falls due
/// while a send is under way goes out right after it. `limit` bounds the whole run. Returns how
/// many were sent.
func paced(rate: Int, count: Int, until limit: ContinuousClock.Instant? = nil, _ send: (Int) async throws -> Void) async throws -> Int {
    let start = ContinuousClock.now
    var n = 0
    while n < count {
        if let limit, ContinuousClock.now >= limit { throw BenchError("sending \(count) changes took past its limit (\(n) sent)") }
        let elapsed = (ContinuousClock.now - start).seconds
        let offered = elapsed * Double(rate)
        // Finite and clamped to 0…count before the conversion: it cannot trap.
        let due = offered.isFinite ? Int(min(max(offered, 0), Double(count))) : count
        guard due > n else {
            let next = Double(n + 1) / Double(rate) - elapsed
            try await Task.sleep(for: .nanoseconds(Int64(max(0.0002, min(next, 0.05)) * 1e9)))
            continue
        }
        while n < due {
            n += 1
            try await send(n)
        }
    }
    return n
}
