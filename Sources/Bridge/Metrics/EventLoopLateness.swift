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
/// A timer can be late for three reasons: the loop ran something else (the bridge's own work),
/// its thread was ready but waited for a core that another thread or process had, or its thread
/// was not running at all (it slept on a lock, waited for a page from disk or for the kernel to
/// reclaim memory, or the hypervisor ran another machine on its core). Linux says how long a
/// thread ran and how long it waited for a core (`/proc/thread-self/schedstat`; with the
/// hypervisor's steal left out of the time it ran), so each tick's lateness is split:
///
/// - `ddp_bridge_event_loop_lateness_seconds`: each tick's lateness (histogram), and
///   `ddp_bridge_event_loop_lateness_max_seconds`, the largest since start;
/// - `ddp_bridge_event_loop_held_seconds`: the part the loop's thread spent running, at most
///   (the lateness less the wait for a core, and no more than the thread ran since the previous
///   tick): what the bridge's own work held the loop; `ddp_bridge_event_loop_held_max_seconds`;
/// - `ddp_bridge_event_loop_blocked_seconds`: the part its thread neither ran nor waited for a
///   core; `ddp_bridge_event_loop_blocked_max_seconds`.
///
/// A tick more than ``noticeAfter`` late is logged (at most once a minute) with the three parts:
/// at warning level when the loop's own work held it that long, else at notice level. Runs as one
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
    private let blocked: Measure

    init(group: any EventLoopGroup, factory: any MetricsFactory, logger: Logger) {
        self.group = group
        self.logger = logger
        lateness = Measure(label: "ddp_bridge_event_loop_lateness", factory: factory)
        held = Measure(label: "ddp_bridge_event_loop_held", factory: factory)
        blocked = Measure(label: "ddp_bridge_event_loop_blocked", factory: factory)
    }

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
                let last = previous.value ?? Tick(due: start + Self.interval, scheduling: Scheduling(times: nil))
                let late = Self.lateness(due: last.due, now: now)
                let thread = scheduling.since(last.scheduling, late: late)
                let split = Self.split(late: late, waited: thread.waited, ran: thread.ran)
                self.lateness.record(late)
                self.held.record(split.held)
                self.blocked.record(split.blocked)
                if late > Self.noticeAfter { self.notice(late, split, now: now) }
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

    /// A tick's lateness, in the three parts it can have (``split(late:waited:ran:)``).
    struct Split: Equatable {
        /// Spent waiting for a core.
        var waited: TimeAmount
        /// Spent running (at most): the loop's own work.
        var held: TimeAmount
        /// Spent neither running nor waiting for a core.
        var blocked: TimeAmount
    }

    /// Splits a tick's lateness given what its loop's thread did since the previous tick: `waited`
    /// for a core and `ran`. The wait is the machine's; of the rest, no more than the thread ran is
    /// the loop's work (`held`: an upper bound, since the thread may have run before the tick was
    /// due); what is left, it spent off any core (`blocked`).
    static func split(late: TimeAmount, waited: TimeAmount, ran: TimeAmount) -> Split {
        let waited = min(max(waited, .zero), late)
        let held = min(late - waited, max(ran, .zero))
        return Split(waited: waited, held: held, blocked: late - waited - held)
    }

    private func notice(_ late: TimeAmount, _ split: Split, now: NIODeadline) {
        let due = lastNotice.withLockedValue { last in
            guard last.map({ now - $0 >= .seconds(60) }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        func ms(_ amount: TimeAmount) -> Logger.MetadataValue { "\(amount.nanoseconds / 1_000_000)" }
        logger.log(
            level: split.held > Self.noticeAfter ? .warning : .notice, "an event loop ran a timer late",
            metadata: [
                "late-ms": ms(late), "held-by-work-ms": ms(split.held), "waited-for-a-core-ms": ms(split.waited),
                "blocked-ms": ms(split.blocked)
            ])
    }

    /// The calling thread's time running and waiting for a core; `nil` where Linux does not say.
    private struct Scheduling {
        let times: (running: TimeAmount, waiting: TimeAmount)?
        static var now: Scheduling {
            Scheduling(times: threadScheduling().map { (.nanoseconds($0.running), .nanoseconds($0.waiting)) })
        }

        /// What the thread did between `earlier` and this: unknown, all of a late tick counts as held.
        func since(_ earlier: Scheduling, late: TimeAmount) -> (waited: TimeAmount, ran: TimeAmount) {
            guard let times, let before = earlier.times else { return (.zero, late) }
            return (times.waiting - before.waiting, times.running - before.running)
        }
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
