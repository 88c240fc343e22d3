import CoreMetrics
import DDP
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// How late each event loop runs what is due on it: a repeating timer on every loop of the
/// group, whose delay past its due time is the time the loop spent on something else. The
/// number that says whether any connection's work holds the loops (docs/RELIABILITY.md):
/// data-sized work runs in bounded steps, so it stays in milliseconds whatever a client asks.
///
/// A timer can be late for two reasons: the loop was busy (or blocked), or its thread was ready
/// but waited for a core that another process (or another thread) had. Linux says how long a
/// thread waited for a core (`/proc/thread-self/schedstat`), so both are exported:
///
/// - `ddp_bridge_event_loop_lateness_seconds`: each tick's lateness (histogram), and
///   `ddp_bridge_event_loop_lateness_max_seconds`, the largest since start;
/// - `ddp_bridge_event_loop_held_seconds`: the lateness less the time the loop's thread waited
///   for a core meanwhile: what the bridge's own work held the loop (histogram), and
///   `ddp_bridge_event_loop_held_max_seconds`.
///
/// A tick more than ``noticeAfter`` late is logged (at most once a minute) with both. Runs as one
/// of the application's services: the timers start with it and are cancelled at shutdown.
final class EventLoopLateness: Service, Sendable {
    /// How often each loop's timer is due.
    static let interval = TimeAmount.milliseconds(20)

    /// Ticks later than this are logged.
    static let noticeAfter = TimeAmount.milliseconds(50)

    private let group: any EventLoopGroup
    private let logger: Logger
    private let lastNotice = NIOLockedValueBox<NIODeadline?>(nil)
    private let lateness: Measure
    private let held: Measure

    init(group: any EventLoopGroup, factory: any MetricsFactory, logger: Logger) {
        self.group = group
        self.logger = logger
        lateness = Measure(label: "ddp_bridge_event_loop_lateness", factory: factory)
        held = Measure(label: "ddp_bridge_event_loop_held", factory: factory)
    }

    /// The largest lateness, and the largest time held, seen on any loop since start.
    var largest: (lateness: TimeAmount, held: TimeAmount) { (lateness.largest, held.largest) }

    /// A loop's previous tick: when the next is due, and its thread's scheduling by then.
    private struct Tick {
        var due: NIODeadline
        var scheduling: Scheduling
    }

    func run() async throws {
        let tasks = group.makeIterator().map { loop in
            let start = NIODeadline.now()
            let previous = NIOLoopBoundBox.makeBoxSendingValue(Tick?.none, eventLoop: loop)
            // Each tick is due one interval after the previous one ran.
            return loop.scheduleRepeatedTask(initialDelay: Self.interval, delay: Self.interval) { _ in
                let now = NIODeadline.now()
                let scheduling = Scheduling.now
                let last = previous.value ?? Tick(due: start + Self.interval, scheduling: scheduling)
                let late = Self.lateness(due: last.due, now: now)
                let waited = scheduling.waiting - last.scheduling.waiting
                let held = Self.held(late: late, waited: waited)
                self.lateness.record(late)
                self.held.record(held)
                if late > Self.noticeAfter { self.notice(late, held: held, waited: waited, now: now) }
                previous.value = Tick(due: now + Self.interval, scheduling: Scheduling.now)
            }
        }
        try? await gracefulShutdown()
        for task in tasks { task.cancel() }
    }

    /// How far past `due` a tick ran (never negative: a timer may fire a little early).
    static func lateness(due: NIODeadline, now: NIODeadline) -> TimeAmount {
        now > due ? now - due : .zero
    }

    /// The part of a tick's lateness its loop's thread did not spend waiting for a core.
    static func held(late: TimeAmount, waited: TimeAmount) -> TimeAmount {
        late > waited ? late - waited : .zero
    }

    private func notice(_ late: TimeAmount, held: TimeAmount, waited: TimeAmount, now: NIODeadline) {
        let due = lastNotice.withLockedValue { last in
            guard last.map({ now - $0 >= .seconds(60) }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        logger.notice(
            "an event loop ran a timer late",
            metadata: [
                "late-ms": "\(late.nanoseconds / 1_000_000)", "held-by-work-ms": "\(held.nanoseconds / 1_000_000)",
                "waited-for-a-core-ms": "\(waited.nanoseconds / 1_000_000)"
            ])
    }

    /// The calling thread's time waiting for a core (zero where Linux does not say).
    private struct Scheduling {
        let waiting: TimeAmount
        static var now: Scheduling { Scheduling(waiting: .nanoseconds(threadScheduling()?.waiting ?? 0)) }
    }

    /// A histogram and the largest value since start.
    private final class Measure: Sendable {
        let histogram: CoreMetrics.Timer
        let maximum: CoreMetrics.Gauge
        private let value = NIOLockedValueBox(TimeAmount.zero)

        init(label: String, factory: any MetricsFactory) {
            histogram = CoreMetrics.Timer(label: label + "_seconds", factory: factory)
            maximum = CoreMetrics.Gauge(label: label + "_max_seconds", factory: factory)
            maximum.record(0)
        }

        var largest: TimeAmount { value.withLockedValue { $0 } }

        func record(_ amount: TimeAmount) {
            histogram.recordNanoseconds(amount.nanoseconds)
            let grew = value.withLockedValue { largest in
                guard amount > largest else { return false }
                largest = amount
                return true
            }
            if grew { maximum.record(Double(amount.nanoseconds) / 1e9) }
        }
    }
}
