import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's HTTP/1.1 child channel with ``ProbeFastPath`` placed after its connection-state
/// handler (the one that enforces the idle timeout). There, the requests the fast path answers
/// and its answers pass through that handler as any others do, so a kept-alive connection that
/// only probes (a load balancer's health check) is not taken for idle and closed; placed before
/// it (as `additionalChannelHandlers` would), it was, after `--read-timeout`.
struct ProbingHTTP1Channel: ServerChildChannel {
    let base: HTTP1Channel
    let admission: ConnectionAdmission
    let refused: @Sendable (ConnectionAdmission.Decision) -> Void
    let fastPath: @Sendable () -> ProbeFastPath

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        // Counted before anything else is made for it; a refused connection is answered and
        // closed by a handler in front of everything (``RefusedConnection``).
        let address = channel.remoteAddress?.ipAddress ?? "unknown"
        let decision = admission.admit(address)
        if decision == .admitted {
            channel.closeFuture.whenComplete { _ in admission.release(address) }
        } else {
            refused(decision)
        }
        return base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let operations = channel.pipeline.syncOperations
            if decision != .admitted {
                try operations.addHandler(RefusedConnection(decision), position: .first)
                return value
            }
            let connectionState = try operations.handler(type: HTTPConnectionStateHandler.self)
            let probes = fastPath()
            try operations.addHandler(probes, position: .after(connectionState))
            let hangUp = EventStreamHangUp()
            try operations.addHandler(hangUp, position: .after(probes))
            try operations.addHandler(HTTP1Hygiene(), position: .after(hangUp))
            return value
        }
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
