import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
import Timing

/// The one clock and the deadline primitive: a driven clock fires what falls due when it is moved,
/// in order, on its loop, and nothing before; a cancelled timer never fires; a wait ends by its
/// event, its deadline or its cancellation, whichever comes first, exactly once.
@Suite struct BridgeClockTests {
    let loop = MultiThreadedEventLoopGroup.singleton.any()

    /// Fired bodies, in order, and a way to wait for a count of them (a deadline of its own).
    final class Fired: Sendable {
        private let state = NIOLockedValueBox<(names: [String], waiter: (count: Int, box: ContinuationBox<Void>)?)>(([], nil))

        struct NotFired: Error, CustomStringConvertible {
            let description: String
        }

        func record(_ name: String) {
            let ready = state.withLockedValue { state -> ContinuationBox<Void>? in
                state.names.append(name)
                guard let waiter = state.waiter, state.names.count >= waiter.count else { return nil }
                state.waiter = nil
                return waiter.box
            }
            ready?.resume(with: .success(()))
        }

        var names: [String] { state.withLockedValue { $0.names } }

        /// Until `count` have fired (the clock's own bodies run as loop jobs, right after `advance`);
        /// throws when they have not within `limit` of real time, so a test fails instead of hanging.
        func wait(for count: Int, on loop: any EventLoop, within limit: Duration = .seconds(10)) async throws {
            let box = ContinuationBox<Void>()
            let already = state.withLockedValue { state -> Bool in
                if state.names.count >= count { return true }
                state.waiter = (count, box)
                return false
            }
            if !already {
                do {
                    try await withDeadline(limit, clock: .system, on: loop) {
                        box.store($0)
                    } end: {
                        box.resume(with: .failure($0))
                    }
                } catch DeadlineError.timedOut {
                    throw NotFired(description: "\(count) fired within \(limit); fired: \(names)")
                }
            }
            // Jobs queued on the loop before this one have run: nothing else is in flight.
            try await loop.submit {}.get()
        }
    }

    @Test func aDrivenClockFiresWhatFallsDueInOrderAndNothingElse() async throws {
        let clock = BridgeClock.driven()
        let fired = Fired()
        let start = clock.now
        clock.schedule(after: .seconds(30), on: loop) { fired.record("30 s") }
        clock.schedule(after: .seconds(10), on: loop) { fired.record("10 s") }
        let cancelled = clock.schedule(after: .seconds(5), on: loop) { fired.record("cancelled") }
        clock.schedule(after: .seconds(3600), on: loop) { fired.record("an hour") }
        cancelled.cancel()
        #expect(clock.pendingCount == 3)
        clock.advance(by: .seconds(31))
        try await fired.wait(for: 2, on: loop)
        #expect(fired.names == ["10 s", "30 s"])
        #expect(clock.now - start >= .seconds(31))
        #expect(clock.pendingCount == 1, "the hour's timer still waits")
        #expect(clock.wallClock.timeIntervalSinceNow >= 30, "the wall clock moved with it")
    }

    @Test func theSystemClockIsNotMovedByHand() async throws {
        let clock = BridgeClock.system
        let before = clock.now
        clock.advance(by: .seconds(3600))
        #expect(clock.now - before < .seconds(60))
        #expect(clock.pendingCount == 0)
        let fired = Fired()
        clock.schedule(after: .milliseconds(1), on: loop) { fired.record("soon") }
        try await fired.wait(for: 1, on: loop)
        #expect(fired.names == ["soon"])
    }

    @Test func aRepeatingTimerFiresOncePerJumpAndStopsWhenCancelled() async throws {
        let clock = BridgeClock.driven()
        let fired = Fired()
        // A driven clock flows with real time too: the interval is a minute, so a loaded machine
        // taking seconds between the jumps cannot fire a tick of its own.
        let repeating = clock.repeating(every: .seconds(60), on: loop) { fired.record("tick") }
        clock.advance(by: .seconds(600))
        try await fired.wait(for: 1, on: loop)
        clock.advance(by: .seconds(60))
        try await fired.wait(for: 2, on: loop)
        #expect(fired.names == ["tick", "tick"], "a jump over ten intervals fires it once")
        repeating.cancel()
        #expect(clock.pendingCount == 0)
        clock.advance(by: .seconds(300))
        try await loop.submit {}.get()
        #expect(fired.names.count == 2)
    }

    @Test func aSleepEndsWhenTheClockPassesItOrItsTaskIsCancelled() async throws {
        let clock = BridgeClock.driven()
        let slept = Task { try await clock.sleep(for: .seconds(60), on: loop) }
        try await clock.waitUntilArmed(delay: .seconds(60), timeout: .seconds(10), on: loop)
        clock.advance(by: .seconds(60))
        try await slept.value

        let cancelled = Task { try await clock.sleep(for: .seconds(60), on: loop) }
        try await clock.waitUntilArmed(delay: .seconds(60), timeout: .seconds(10), on: loop)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(clock.pendingCount == 0, "the cancelled sleep's timer went with it")
    }

    @Test func aWaitEndsByItsEventItsDeadlineOrItsCancellationExactlyOnce() async throws {
        let clock = BridgeClock.driven()
        // By its event: the deadline's timer goes.
        let answered = try await withDeadline(.seconds(5), clock: clock, on: loop) { (continuation: CheckedContinuation<Int, any Error>) in
            continuation.resume(returning: 7)
        } end: { _ in
            Issue.record("a wait that was answered ended by its deadline")
        }
        #expect(answered == 7)
        #expect(clock.pendingCount == 0)

        // By its deadline: `end` gets timedOut and resumes the continuation it holds.
        let box = ContinuationBox<Int>()
        let timing = Task {
            try await withDeadline(.seconds(5), clock: clock, on: loop) {
                box.store($0)
            } end: {
                box.resume(with: .failure($0))
            }
        }
        try await clock.waitUntilArmed(delay: .seconds(5), timeout: .seconds(10), on: loop)
        clock.advance(by: .seconds(5))
        await #expect(throws: DeadlineError.timedOut) { try await timing.value }
        #expect(!box.resume(with: .success(1)), "the late answer finds it taken")

        // By its cancellation.
        let other = ContinuationBox<Int>()
        let cancelling = Task {
            try await withDeadline(.seconds(5), clock: clock, on: loop) {
                other.store($0)
            } end: {
                other.resume(with: .failure($0))
            }
        }
        try await clock.waitUntilArmed(delay: .seconds(5), timeout: .seconds(10), on: loop)
        cancelling.cancel()
        await #expect(throws: DeadlineError.cancelled) { try await cancelling.value }
    }

    @Test func aBodyPastItsDeadlineIsCancelledAndItsLateValueHandedOver() async throws {
        let clock = BridgeClock.driven()
        let late = NIOLockedValueBox<[Int]>([])
        let handedOver = Fired()
        let started = Fired()
        // The body ends when the test lets it, after its deadline (not after a time of its own,
        // which a loaded machine could take before the test moves the clock).
        let release = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)
        let running = Task {
            try await withDeadline(
                .seconds(3), clock: clock, on: loop,
                discardLate: { value in
                    late.withLockedValue { $0.append(value) }
                    handedOver.record("late")
                }
            ) {
                // Ignores cancellation on purpose: a store call may.
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    release.withLockedValue { $0 = continuation }
                    started.record("started")
                }
                return 42
            }
        }
        try await started.wait(for: 1, on: loop)
        clock.advance(by: .seconds(3))
        await #expect(throws: DeadlineError.timedOut) { try await running.value }
        release.withLockedValue { held in
            defer { held = nil }
            return held
        }?.resume()
        try await handedOver.wait(for: 1, on: loop)
        #expect(late.withLockedValue { $0 } == [42])

        let onTime = try await withDeadline(.seconds(3), clock: clock, on: loop) { 5 }
        #expect(onTime == 5)
    }

    /// A test learns that a timer of a delay is set as it is set: at once when one waits already,
    /// when one is set later, never for a timer of another delay; at once on the system clock.
    @Test func aTestLearnsWhenATimerOfADelayIsSet() async throws {
        let clock = BridgeClock.driven()
        // Delays of minutes: the driven clock flows with real time, and these must not fire of themselves.
        let early = clock.schedule(after: .seconds(300), on: loop) {}
        try await clock.waitUntilArmed(delay: .seconds(300), timeout: .seconds(10), on: loop)

        let waiting = Task { try await clock.waitUntilArmed(delay: .seconds(500), timeout: .seconds(10), on: loop) }
        clock.schedule(after: .seconds(500), on: loop) {}
        try await waiting.value

        await #expect(throws: DeadlineError.timedOut, "only the 300 s and 500 s timers are set") {
            try await clock.waitUntilArmed(delay: .seconds(700), timeout: .milliseconds(50), on: loop)
        }
        early.cancel()
        #expect(clock.pendingCount == 1)
        try await BridgeClock.system.waitUntilArmed(delay: .seconds(700), timeout: .milliseconds(50), on: loop)
    }
}
