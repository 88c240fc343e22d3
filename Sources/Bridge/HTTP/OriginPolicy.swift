import HTTPTypes
import Hummingbird

/// What a request's `Origin` lets it do, against the CORS settings (login CSRF and the like):
///
/// - no `Origin` (curl, services) or a **credentialed** origin (listed in `--cors-origins`, or the
///   bridge's own pages: the origin names the `Host` the request was sent to, or the
///   `X-Forwarded-Host` a trusted proxy passed on) may do anything;
/// - an origin admitted only by `*` is **anonymous**: it may call the API with a bearer token,
///   and no answer to it sets a cookie;
/// - any other origin is **refused** for writes (`POST`, `PUT`, `PATCH`, `DELETE`): it cannot log
///   in, create an account or a session, or change anything. A plain HTML form can post
///   `application/x-www-form-urlencoded` or `text/plain` from any site without a preflight, so the
///   content type alone decides nothing.
struct OriginPolicy: Sendable {
    enum Standing: Equatable { case credentialed, anonymous, refused }

    let listed: Set<String>
    let anyOrigin: Bool

    init(corsOrigins: [String]) {
        listed = Set(corsOrigins.filter { $0 != "*" })
        anyOrigin = corsOrigins.contains("*")
    }

    /// `hosts`: the authorities the request was sent to (its `Host`, and a trusted proxy's `X-Forwarded-Host`).
    func standing(origin: String?, hosts: [String]) -> Standing {
        guard let origin else { return .credentialed }
        if listed.contains(origin) || hosts.contains(where: { Self.isSameOrigin(origin, host: $0) }) { return .credentialed }
        return anyOrigin ? .anonymous : .refused
    }

    /// `http://host[:port]` or `https://host[:port]` whose authority is `host`.
    static func isSameOrigin(_ origin: String, host: String) -> Bool {
        guard !host.isEmpty else { return false }
        for scheme in ["http://", "https://"] where origin.hasPrefix(scheme) {
            return origin.dropFirst(scheme.count).lowercased() == host.lowercased()
        }
        return false
    }
}

/// When the session cookie carries `Secure`: `auto` (the default) when a trusted proxy says the
/// client's connection was TLS (`X-Forwarded-Proto: https`), `always`, or `never`.
public enum CookieSecurity: String, Sendable, CaseIterable {
    case auto, always, never
}
