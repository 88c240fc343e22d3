import HTTPTypes
import Hummingbird

/// Headers that keep a browser to the bridge's own origin: the console may load scripts,
/// styles and images only from the bridge and connect only to it; no framing, no sniffing.
struct SecurityHeadersMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext

    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        Self.add(to: &response.headers)
        return response
    }

    static func add(to headers: inout HTTPFields) {
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[.xContentTypeOptions] = "nosniff"
        headers[referrerPolicy] = "no-referrer"
    }
}
