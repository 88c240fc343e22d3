import HTTPTypes
import Hummingbird

/// Refuses requests that are malformed or that a browser could be tricked into sending, before
/// any route runs:
/// - a query whose names or values are not valid percent-encoded UTF-8 is 400, naming the
///   parameter (it was ignored before, so `selector=%ZZ` returned every document);
/// - a write (`POST`, `PUT`, `PATCH`, `DELETE`) never takes its token from `?token=`, which is for
///   `GET` only (an `EventSource` can set no header);
/// - a write authenticated by the session cookie alone must be `application/json` (403 otherwise,
///   even without a body): a cross-site form can post `text/plain` or form data with the user's
///   cookie, but not JSON.
/// Both are authentication failures (401, 403), answered before the route runs.
struct RequestHygieneMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let query = request.uri.query, let bad = QueryString.firstUndecodableParameter(query) {
            throw BridgeError.badRequest("the query parameter '\(bad)' is not valid percent-encoded UTF-8")
        }
        if request.method != .get, request.method != .head, request.method != .options {
            let bearer = request.headers[.authorization].map { $0.prefix(7).lowercased() == "bearer " } ?? false
            // Refused as authentication failures (401/403), before anything else is looked at.
            if !bearer, RequestInput.query(request, "token") != nil {
                throw BridgeError.unauthorized(
                    "query-token-not-allowed", "a token in the query string is accepted on GET only; send it as Authorization: Bearer")
            }
            let cookie = request.headers[values: .cookie].contains { $0.contains(SessionCookie.name + "=") }
            if !bearer, cookie, request.method != .delete, !Self.isJSON(request.headers[.contentType]) {
                throw BridgeError(
                    .forbidden, "cookie-write-not-json",
                    "a write authenticated by the session cookie must be sent as Content-Type: application/json")
            }
        }
        return try await next(request, context)
    }

    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let media = contentType.split(separator: ";").first.map { RequestInput.trimmed($0).lowercased() } ?? ""
        return media == "application/json" || (media.hasPrefix("application/") && media.hasSuffix("+json"))
    }
}
