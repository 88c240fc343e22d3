import HTTPTypes
import Hummingbird

/// CORS for an allow-list of origins, through Hummingbird's `CORSMiddleware` (preflight answers,
/// `Access-Control-*` headers). A listed origin may send credentials (the session cookie). `*`
/// admits every other origin **without** credentials (`Access-Control-Allow-Origin: *`, no
/// `Allow-Credentials`), so a page from anywhere can use a bearer token but never a visitor's
/// cookie. Other origins get no CORS headers, so browsers refuse them.
struct CORSGate: RouterMiddleware {
    typealias Context = BridgeRequestContext
    let origins: Set<String>
    let listed = CORSGate.middleware(credentials: true)
    let anyOrigin = CORSGate.middleware(credentials: false)

    private static func middleware(credentials: Bool) -> CORSMiddleware<BridgeRequestContext> {
        CORSMiddleware(
            allowOrigin: credentials ? .originBased : .all,
            allowHeaders: [.accept, .authorization, .contentType, .origin, HTTPField.Name("Last-Event-ID") ?? .accept],
            allowMethods: [.get, .head, .post, .patch, .delete, .options],
            allowCredentials: credentials,
            exposedHeaders: ["Retry-After"],
            maxAge: .seconds(600)
        )
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin] else { return try await next(request, context) }
        if origins.contains(origin) { return try await listed.handle(request, context: context, next: next) }
        if origins.contains("*") { return try await anyOrigin.handle(request, context: context, next: next) }
        return try await next(request, context)
    }
}
