public import DDP
import Logging
import NIOConcurrencyHelpers

/// Logs why the upstream cannot be reached, once per change of cause rather than once per
/// attempt: a warning when an attempt fails for another cause than the last one logged, and a
/// line at `info` when a connection succeeds after one. The connections of a process share one
/// (the bridge's sessions, its public pool and its readiness probe), so an outage that every
/// session's retries run into is one warning, not one per session and per retry; a client made
/// alone gets its own.
public final class UpstreamFailureLog: Sendable {
    private let current = NIOLockedValueBox<UpstreamFailure?>(nil)

    public init() {}

    /// The failure logged last, until a connection succeeds.
    public var failure: UpstreamFailure? { current.withLockedValue { $0 } }

    /// An attempt failed: a warning, when its cause is not the one logged last.
    func failed(_ failure: UpstreamFailure, logger: Logger) {
        let changed = current.withLockedValue { current in
            guard current?.cause != failure.cause else { return false }
            current = failure
            return true
        }
        guard changed else { return }
        logger.warning("upstream connection failed: \(failure)", metadata: ["ddp.cause": "\(failure.code)"])
    }

    /// A connection succeeded: the next failure is news again.
    func connected(logger: Logger) {
        guard
            let previous = current.withLockedValue({ current in
                defer { current = nil }
                return current
            })
        else { return }
        logger.info("upstream connection restored", metadata: ["ddp.previous_cause": "\(previous.code)"])
    }
}
