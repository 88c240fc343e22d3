import HTTPTypes
import Hummingbird
import Logging

/// Turns every error into the bridge's JSON error shape; nothing escapes as a bare 500.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let bridgeError = BridgeError.from(error)
            if bridgeError.status.code >= 500 {
                context.logger.error("request failed", metadata: ["status": "\(bridgeError.status.code)", "error": "\(bridgeError.reason)"])
            }
            return try bridgeError.response(from: request, context: context)
        }
    }
}
