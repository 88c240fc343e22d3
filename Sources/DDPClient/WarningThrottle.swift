/// Holds back warnings that can repeat at will (one connection's garbage from an upstream, the
/// requests that fail together while it is away): of each kind, the first is logged, then at most
/// one per `interval`, saying how many were held back since (20,000 garbage frames from a bad
/// upstream made 40,000 log lines). A value with no clock: each warning comes with its instant.
package struct WarningThrottle<Kind: Hashable>: Sendable where Kind: Sendable {
    package let interval: Duration
    private var kinds: [Kind: (logged: ContinuousClock.Instant, heldBack: Int)] = [:]

    package init(interval: Duration) { self.interval = interval }

    /// A warning of `kind` at `now`: `nil` to hold it back; otherwise log it, with the number of
    /// warnings of its kind held back since the last one logged.
    package mutating func admit(_ kind: Kind, at now: ContinuousClock.Instant) -> Int? {
        if let last = kinds[kind], now - last.logged < interval {
            kinds[kind]?.heldBack += 1
            return nil
        }
        let heldBack = kinds[kind]?.heldBack ?? 0
        kinds[kind] = (now, 0)
        return heldBack
    }
}
