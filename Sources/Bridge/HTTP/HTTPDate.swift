import Foundation
import Timing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `Date` header of answers sent from an event loop (probes, streams opened there), as
/// Hummingbird adds it to every routed answer (RFC 9110 §6.6.1: IMF-fixdate, in GMT), from the
/// bridge's clock. Formatted once a second at most; the rest read the last one.
final class HTTPDate: Sendable {
    private let clock: BridgeClock
    private let last = LockedState<(second: Int, text: String)>((-1, ""))

    init(clock: BridgeClock) { self.clock = clock }

    /// Now, as a `Date` header's value.
    var now: String {
        // Checked: a wall clock far outside time_t's years (a clock set wrong) gives the epoch, not a trap.
        let second = Int(exactly: clock.wallClock.timeIntervalSince1970.rounded(.down)).map { min(max($0, 0), Self.lastSecond) } ?? 0
        return last.withLock { last in
            if last.second != second { last = (second, Self.format(second)) }
            return last.text
        }
    }

    /// The last second formatted (31 Dec 9999, 23:59:59 GMT): IMF-fixdate has four digits of year.
    static let lastSecond = 253_402_300_799

    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `second` (since 1970) as IMF-fixdate: `Wed, 25 Nov 2026 14:08:23 GMT`.
    static func format(_ second: Int) -> String {
        var time = time_t(second)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return "Thu, 01 Jan 1970 00:00:00 GMT" }
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let day = days[(Int(parts.tm_wday) % 7 + 7) % 7]
        let month = months[(Int(parts.tm_mon) % 12 + 12) % 12]
        return "\(day), \(two(parts.tm_mday)) \(month) \(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
