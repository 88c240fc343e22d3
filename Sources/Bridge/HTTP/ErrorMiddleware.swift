import HTTPTypes
import Hummingbird
import Logging

/// Answers 405 (with `Allow`) for a verb a known path does not take.
struct MethodNotAllowedMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext
    let routes: RouteTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            // The router found no handler: a known path with another verb is 405.
            guard let allowed = routes.methods(for: request.uri.path) else { throw BridgeError.from(error) }
            throw BridgeError(
                .methodNotAllowed,
                "\(request.method.rawValue) is not allowed here; use \(allowed.map(\.rawValue).joined(separator: ", "))", allow: allowed)
        }
    }
}

/// Turns every error into the bridge's JSON error shape; nothing escapes as a bare 500.
struct ErrorShapeMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let bridgeError = BridgeError.from(error)
            // An unreachable or slow upstream is an expected state (503/504): a warning; anything else 5xx is an error.
            if bridgeError.status == .serviceUnavailable || bridgeError.status == .gatewayTimeout {
                context.logger.warning("request failed", metadata: ["status": "\(bridgeError.status.code)", "error": "\(bridgeError.reason)"])
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
