import DDP
import HTTPTypes
import Hummingbird

/// Refuses requests that are malformed or that a browser could be tricked into sending, before
/// any route runs:
/// - a request target (path and query) longer than 64 KiB is 414 `uri-too-long`:
///   what reaches a selector, a field list or params has a stated bound (a longer head is refused
///   by the HTTP parser, 431);
/// - a query whose names or values are not valid percent-encoded UTF-8 is 400, naming the
///   parameter (ignored, `selector=%ZZ` would return every document);
/// - a write (`POST`, `PUT`, `PATCH`, `DELETE`) never takes its token from `?token=`, which is for
///   `GET` only (an `EventSource` can set no header);
/// - a write authenticated by the session cookie alone must be `application/json` (403 otherwise,
///   even without a body): a cross-site form can post `text/plain` or form data with the user's
///   cookie, but not JSON.
/// - a write from an `Origin` the CORS settings do not allow is 403 (``OriginPolicy``), and no
///   answer to an origin without credentials sets a cookie;
/// Each is an authentication failure (401, 403), answered before the route runs. The session
/// cookie gets `Secure` as ``CookieSecurity`` says.
struct RequestHygieneMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext

    /// The part of the configuration the checks use.
    struct Settings: Sendable, Equatable {
        /// Origins allowed to call the bridge from a browser (`--cors-origins`).
        var corsOrigins: [String]
        var cookieSecurity: CookieSecurity
        /// Where the MCP endpoint is, and the origins it admits besides the bridge's own and the
        /// CORS ones (`--mcp-allowed-origins`, normalized).
        var mcpPath: String
        var mcpAllowedOrigins: Set<String>
        /// Which peers are trusted proxies, whose `X-Forwarded-Proto` is believed.
        var clients: ClientIdentity
    }

    let origins: OriginPolicy
    let settings: Settings

    init(settings: Settings, own: OwnOrigins) {
        self.origins = OriginPolicy(corsOrigins: settings.corsOrigins, own: own)
        self.settings = settings
    }

    /// The request target's own refusals, from its text alone, the same on every door
    /// (``RequestClassifier/problem(_:)``): past its length, 414; a query parameter that does
    /// not decode, 400.
    static func checkTarget(_ target: String?) throws(BridgeError) {
        if let problem = RequestClassifier.problem(target ?? "") { throw refusal(problem) }
    }

    /// The answer to a target's problem.
    static func refusal(_ problem: TargetProblem) -> BridgeError {
        switch problem {
        case .tooLong(let length):
            let limit = RequestClassifier.maximumTargetBytes
            return BridgeError(
                .uriTooLong,
                "The request's path and query are \(length) bytes; the bridge takes at most \(limit) (64 KiB): narrow the selector or the list of values",
                details: ["length": .int(length), "limit": .int(limit)])
        case .undecodable(let parameter):
            return .badRequest("the query parameter '\(parameter)' is not valid percent-encoded UTF-8")
        }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try Self.checkTarget(request.head.path)
        let origin = request.headers[.origin]
        var standing = origins.standing(origin: origin)
        // The MCP endpoint checks every request's Origin, reads too (the transport asks it, against
        // DNS rebinding), and admits its own list besides the bridge's origins.
        if request.uri.path == settings.mcpPath, let origin {
            if settings.mcpAllowedOrigins.contains(OriginPolicy.normalized(origin) ?? origin) { standing = .credentialed }
            if standing == .refused {
                throw BridgeError(
                    .originNotAllowed,
                    "Pages from the origin '\(origin.prefix(200))' may not use the MCP endpoint (not among the bridge's own, CORS or --mcp-allowed-origins)"
                )
            }
        }
        if request.method != .get, request.method != .head, request.method != .options {
            if standing == .refused {
                throw BridgeError(
                    .originNotAllowed,
                    "Requests from the origin '\(origin?.prefix(200) ?? "")' may not write here (it is not among the bridge's CORS or public origins)"
                )
            }
            let bearer = request.headers[.authorization].map { $0.prefix(7).lowercased() == "bearer " } ?? false
            // Refused as authentication failures (401/403), before anything else is looked at.
            if !bearer, RequestInput.query(request, "token") != nil {
                throw BridgeError(
                    .queryTokenNotAllowed, "a token in the query string is accepted on GET only; send it as Authorization: Bearer")
            }
            let cookie = request.headers[values: .cookie].contains { $0.contains(SessionCookie.name + "=") }
            if !bearer, cookie, request.method != .delete, !Self.isJSON(request.headers[.contentType]) {
                throw BridgeError(
                    .cookieWriteNotJSON,
                    "a write authenticated by the session cookie must be sent as Content-Type: application/json")
            }
        }
        var response = try await next(request, context)
        if response.headers[.setCookie] != nil {
            if standing != .credentialed {
                response.headers[.setCookie] = nil
            } else if isSecure(request, context) {
                response.headers[values: .setCookie] = response.headers[values: .setCookie].map { $0 + "; Secure" }
            }
        }
        return response
    }

    /// Whether the session cookie gets `Secure`: always, never, or when a trusted proxy says the
    /// client's connection was TLS.
    private func isSecure(_ request: Request, _ context: Context) -> Bool {
        switch settings.cookieSecurity {
        case .always: return true
        case .never: return false
        case .auto:
            guard let proto = request.headers[.init("X-Forwarded-Proto")!], fromTrustedProxy(context) else { return false }
            return proto.split(separator: ",").last.map { RequestInput.trimmed($0).lowercased() } == "https"
        }
    }

    private func fromTrustedProxy(_ context: Context) -> Bool {
        settings.clients.isTrustedProxy(context.remoteAddress?.ipAddress ?? "")
    }

    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let media = contentType.split(separator: ";").first.map { RequestInput.trimmed($0).lowercased() } ?? ""
        return media == "application/json" || (media.hasPrefix("application/") && media.hasSuffix("+json"))
    }
}
