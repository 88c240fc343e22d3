import CoreMetrics
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// How late each event loop runs what is due on it: a repeating timer on every loop of the
/// group, whose delay past its due time is the time the loop spent on something else. The one
/// number that says whether any connection's work holds the loops (docs/RELIABILITY.md): data-sized
/// work runs in bounded steps, so this stays in milliseconds whatever a client asks.
///
/// Exported as `ddp_bridge_event_loop_lateness_seconds` (a histogram of every tick's lateness) and
/// `ddp_bridge_event_loop_lateness_max_seconds` (the largest since start). Runs as one of the
/// application's services: the timers start with it and are cancelled at shutdown.
final class EventLoopLateness: Service, Sendable {
    /// How often each loop's timer is due.
    static let interval = TimeAmount.milliseconds(20)

    private let group: any EventLoopGroup
    private let histogram: CoreMetrics.Timer
    private let maximum: CoreMetrics.Gauge
    private let largest = NIOLockedValueBox(TimeAmount.zero)

    init(group: any EventLoopGroup, factory: any MetricsFactory) {
        self.group = group
        histogram = CoreMetrics.Timer(label: "ddp_bridge_event_loop_lateness_seconds", factory: factory)
        maximum = CoreMetrics.Gauge(label: "ddp_bridge_event_loop_lateness_max_seconds", factory: factory)
        maximum.record(0)
    }

    /// The largest lateness seen on any loop since start.
    var largestLateness: TimeAmount { largest.withLockedValue { $0 } }

    func run() async throws {
        let tasks = group.makeIterator().map { loop in
            // Each loop's tick is due one interval after the previous one ran.
            let due = NIOLoopBoundBox.makeBoxSendingValue(NIODeadline.now() + Self.interval, eventLoop: loop)
            return loop.scheduleRepeatedTask(initialDelay: Self.interval, delay: Self.interval) { _ in
                let now = NIODeadline.now()
                self.record(Self.lateness(due: due.value, now: now))
                due.value = now + Self.interval
            }
        }
        try? await gracefulShutdown()
        for task in tasks { task.cancel() }
    }

    /// How far past `due` a tick ran (never negative: a timer may fire a little early).
    static func lateness(due: NIODeadline, now: NIODeadline) -> TimeAmount {
        now > due ? now - due : .zero
    }

    private func record(_ lateness: TimeAmount) {
        histogram.recordNanoseconds(lateness.nanoseconds)
        let grew = largest.withLockedValue { largest in
            guard lateness > largest else { return false }
            largest = lateness
            return true
        }
        if grew { maximum.record(Double(lateness.nanoseconds) / 1e9) }
    }
}
