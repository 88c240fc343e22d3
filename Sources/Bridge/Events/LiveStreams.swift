import DDP
import DDPClient
import NIOCore
import Timing

/// The event streams their connections' event loops write (``StreamHandOff``). No request task
/// holds them (the HTTP server does not wait for them), so the bridge's shutdown reaches them
/// here: each gets a last event and its connection closes after it.
final class LiveStreams: Sendable {
    private struct State {
        /// Each stream with its connection's close.
        var streams: [ObjectIdentifier: (stream: EventStream, closed: EventLoopFuture<Void>)] = [:]
        var shuttingDown = false
    }

    /// The last event of a stream the bridge's shutdown ends.
    static let shuttingDown = SSEFrame.lastError(.shuttingDown, "The bridge is shutting down; reconnect with Last-Event-ID")

    private let state = LockedState(State())
    private let clock: BridgeClock

    init(clock: BridgeClock = .system) { self.clock = clock }

    /// Counts `stream` until `closed` completes (its connection's close); ends it at once when
    /// shutdown has begun.
    func add(_ stream: EventStream, until closed: EventLoopFuture<Void>) {
        let key = ObjectIdentifier(stream)
        let late = state.withLock { state in
            state.streams[key] = (stream, closed)
            return state.shuttingDown
        }
        if late { stream.finish(with: Self.shuttingDown) }
        closed.whenComplete { _ in self.state.withLock { $0.streams[key] = nil } }
    }

    /// Ends every stream with ``shuttingDown`` (and any stream added from now on).
    func shutDown() {
        let streams = state.withLock { state in
            state.shuttingDown = true
            return state.streams.values.map(\.stream)
        }
        for stream in streams { stream.finish(with: Self.shuttingDown) }
    }

    /// The streams open whose last frame is decided (cut, ended), not yet closed.
    var ending: Int { state.withLock { $0.streams.values.count { $0.stream.hasEnded } } }

    /// Waits until every stream's connection has closed (their last events written), or `limit`.
    func waitUntilClosed(within limit: Duration) async {
        let closes = state.withLock { $0.streams.values.map(\.closed) }
        guard let loop = closes.first?.eventLoop else { return }
        // Whichever comes first: every close, or the deadline.
        let done = OneShot<Bool>()
        EventLoopFuture.andAllComplete(closes, on: loop).whenComplete { _ in done.resolve(true) }
        let timer = clock.schedule(after: limit, on: loop) { done.resolve(false) }
        _ = await done.value
        timer.cancel()
    }
}
