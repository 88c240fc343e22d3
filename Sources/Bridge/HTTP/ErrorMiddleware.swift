import DDPClient
import HTTPTypes
import Hummingbird
import Logging
import Timing

/// Turns every error into the bridge's JSON error shape; nothing escapes as a bare 500.
struct ErrorShapeMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext
    /// The 503 and 504 warnings: of each status and code, the first is logged, then at most one
    /// every 10 s with how many were held back (300 calls timing out together make a line, not 300).
    let warnings = LockedState(WarningThrottle<String>(interval: .seconds(10)))
    let clock: BridgeClock

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let bridgeError = BridgeError.from(error)
            // An unreachable or slow upstream is an expected state (503/504): a warning; anything else 5xx is an error.
            if bridgeError.status == .serviceUnavailable || bridgeError.status == .gatewayTimeout {
                let kind = "\(bridgeError.status.code) \(bridgeError.code)"
                let now = clock.now
                if let heldBack = warnings.withLock({ $0.admit(kind, at: now) }) {
                    var metadata: Logger.Metadata = ["status": "\(bridgeError.status.code)", "error": "\(bridgeError.reason)"]
                    if heldBack > 0 { metadata["held-back"] = "\(heldBack)" }
                    context.logger.warning("request failed", metadata: metadata)
                }
            } else if bridgeError.status.code >= 500 {
                // Keep the original error for whoever investigates (its type and description; our
                // errors never carry tokens or passwords).
                context.logger.error(
                    "request failed",
                    metadata: [
                        "status": "\(bridgeError.status.code)", "error": "\(bridgeError.reason)", "cause": "\(String(reflecting: error))"
                    ])
            }
            return try bridgeError.response(from: request, context: context)
        }
    }
}
