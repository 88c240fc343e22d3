import HTTPTypes
import Hummingbird
import NIOCore

/// What a request's `Origin` lets it do, against the CORS settings (login CSRF and the like):
///
/// - no `Origin` (curl, services) or a **credentialed** origin (listed in `--cors-origins`, or one
///   of the bridge's own: ``OwnOrigins``) may do anything;
/// - an origin admitted only by `*` is **anonymous**: it may call the API with a bearer token,
///   and no answer to it sets a cookie;
/// - any other origin is **refused** for writes (`POST`, `PUT`, `PATCH`, `DELETE`): it cannot log
///   in, create an account or a session, or change anything. A plain HTML form can post
///   `application/x-www-form-urlencoded` or `text/plain` from any site without a preflight, so the
///   content type alone decides nothing.
///
/// Same-origin is never decided from what the client sends: `Host: evil.example` with `Origin:
/// http://evil.example` is what a page of a rebinding domain (evil.example resolved to the
/// bridge's address) sends, and it got 201 and a session cookie. A trusted proxy's
/// `X-Forwarded-Host` is no better: proxies pass on the client's `Host`.
struct OriginPolicy: Sendable {
    enum Standing: Equatable { case credentialed, anonymous, refused }

    let listed: Set<String>
    let anyOrigin: Bool
    let own: OwnOrigins

    init(corsOrigins: [String], own: OwnOrigins) {
        listed = Set(corsOrigins.filter { $0 != "*" })
        anyOrigin = corsOrigins.contains("*")
        self.own = own
    }

    func standing(origin: String?) -> Standing {
        guard let origin else { return .credentialed }
        if listed.contains(origin) || own.contains(Self.normalized(origin) ?? origin) { return .credentialed }
        return anyOrigin ? .anonymous : .refused
    }

    /// An origin as a browser writes it (RFC 6454 §6.2): `http://` or `https://`, the host and
    /// port in lower case, no default port, no path; `nil` for anything else.
    static func normalized(_ text: String) -> String? {
        let lower = text.lowercased()
        for (scheme, defaultPort) in [("http://", ":80"), ("https://", ":443")] where lower.hasPrefix(scheme) {
            var authority = lower.dropFirst(scheme.count)
            if authority.hasSuffix("/") { authority = authority.dropLast() }
            guard !authority.isEmpty, !authority.contains(where: { "/?#@ ".contains($0) }) else { return nil }
            if authority.hasSuffix(defaultPort) { authority = authority.dropLast(defaultPort.count) }
            return scheme + authority
        }
        return nil
    }
}

/// The origins of the bridge's own pages (the web console), whose writes are same-origin:
/// `--public-origin`, or, when that is not set, the listening address's, known once the server
/// is bound (port 0 is chosen then): `http://ADDRESS:PORT`, and `http://localhost:PORT` on a
/// loopback address; none on a wildcard address, which names no origin.
final class OwnOrigins: Sendable {
    private let configured: Set<String>?
    private let listening = LockedState<Set<String>>([])

    init(configured: [String]?) { self.configured = configured.map { Set($0.compactMap(OriginPolicy.normalized)) } }

    /// The server is listening on `address`; the origins in force from now on.
    func bound(to address: SocketAddress?) -> [String] {
        if let configured { return configured.sorted() }
        let origins = Self.origins(listeningOn: address)
        listening.withLock { $0 = Set(origins) }
        return origins
    }

    func contains(_ origin: String) -> Bool {
        if let configured { return configured.contains(origin) }
        return listening.withLock { $0.contains(origin) }
    }

    static func origins(listeningOn address: SocketAddress?) -> [String] {
        guard let ip = address?.ipAddress, let port = address?.port, let bytes = IPRange.parse(Substring(ip)) else { return [] }
        guard bytes.contains(where: { $0 != 0 }) else { return [] }  // 0.0.0.0 or ::
        var origins = ["http://\(bytes.count == 16 ? "[\(ip)]" : ip):\(port)"]
        let loopback = bytes.count == 4 ? bytes[0] == 127 : bytes.dropLast().allSatisfy { $0 == 0 } && bytes.last == 1
        if loopback { origins.append("http://localhost:\(port)") }
        return origins.compactMap(OriginPolicy.normalized)
    }
}

/// When the session cookie carries `Secure`: `auto` (the default) when a trusted proxy says the
/// client's connection was TLS (`X-Forwarded-Proto: https`), `always`, or `never`.
public enum CookieSecurity: String, Sendable, CaseIterable {
    case auto, always, never
}
