import HTTPTypes
import Hummingbird
import NIOCore

/// Who the end user behind a request is, for every per-address limit: the reverse proxies whose
/// `X-Forwarded-For` entries are trusted (`--trusted-proxies`, the deprecated
/// `--trust-forwarded-for`), and the bits of an IPv6 address that name one client
/// (`--ipv6-client-prefix`).
struct ClientIdentity: Sendable, Equatable {
    var trustedProxies: [IPRange]
    /// Trust the direct peer as a proxy, whatever it is (one proxy in front).
    var trustsPeer: Bool
    /// An IPv6 client is its network this many bits long (``ClientKey``).
    var ipv6Prefix: Int

    /// The key every per-address limit counts `address` by (``ClientKey``).
    func key(_ address: String) -> ClientKey { ClientKey(address: address, ipv6Prefix: ipv6Prefix) }

    /// The key of a request's end user.
    func key(_ request: Request, _ context: BridgeRequestContext) -> ClientKey { key(address(request, context)) }

    /// The end user's address (see ``ClientAddress/resolve(peer:forwardedFor:trusted:trustPeer:)``).
    func address(_ request: Request, _ context: BridgeRequestContext) -> String {
        address(request.headers, peer: context.remoteAddress)
    }

    /// The end user's address, from a request's headers and its connection's peer `peer`.
    func address(_ headers: HTTPFields, peer: SocketAddress?) -> String {
        let peer = peer?.ipAddress ?? "unknown"
        guard trustsPeer || !trustedProxies.isEmpty else { return peer }
        return ClientAddress.resolve(
            peer: peer, forwardedFor: headers[values: Self.forwardedFor], trusted: trustedProxies, trustPeer: trustsPeer)
    }

    static let forwardedFor = HTTPField.Name("X-Forwarded-For") ?? .via

    /// Whether the direct peer `peer` is a trusted proxy (its connections carry many clients).
    func isTrustedProxy(_ peer: String) -> Bool {
        trustsPeer || trustedProxies.contains { $0.contains(Substring(peer)) }
    }
}
