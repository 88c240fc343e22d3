import HTTPTypes
import Hummingbird

/// CORS for an allow-list of origins: a listed origin (or any, with `*`) goes through
/// Hummingbird's `CORSMiddleware` (preflight answers, `Access-Control-*` headers, credentials
/// for the session cookie); other origins get no CORS headers, so browsers refuse them.
struct CORSGate: RouterMiddleware {
    typealias Context = BridgeRequestContext
    let origins: Set<String>
    let cors = CORSMiddleware<BridgeRequestContext>(
        allowOrigin: .originBased,
        allowHeaders: [.accept, .authorization, .contentType, .origin, .init("Last-Event-ID")!],
        allowMethods: [.get, .head, .post, .patch, .delete, .options],
        allowCredentials: true,
        exposedHeaders: ["Retry-After"],
        maxAge: .seconds(600)
    )

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], origins.contains("*") || origins.contains(origin) else {
            return try await next(request, context)
        }
        return try await cors.handle(request, context: context, next: next)
    }
}
