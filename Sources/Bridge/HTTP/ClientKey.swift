/// What every per-address limit counts a client by: an IPv4 client by its address, an IPv6
/// client by its network, `--ipv6-client-prefix` bits long (64 by default). A subscriber or a
/// host is given a whole /64 and may use any address in it: counted address by address, it
/// rotated past every limit.
///
/// Made in one place only (``ClientIdentity/key(_:)``), so the limits cannot key a
/// client two ways: connections (``ConnectionAdmission``), sessions, failed logins and session
/// creations (``SessionRegistry``), public readers and subscriptions (``PublicFanout``), memory
/// shares (``MemoryBudget``).
struct ClientKey: Hashable, Sendable, CustomStringConvertible {
    let description: String

    /// An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is its IPv4 address. Text that is no
    /// address (a peer NIO could not name, what a trusted proxy passed on) is its own key.
    init(address: String, ipv6Prefix: Int) {
        guard var bytes = IPRange.parse(Substring(address)) else {
            description = address
            return
        }
        guard bytes.count == 16 else {
            description = IPRange.format(bytes)
            return
        }
        let prefix = min(max(ipv6Prefix, 0), 128)
        for index in bytes.indices {
            let kept = min(max(prefix - index * 8, 0), 8)
            bytes[index] &= UInt8(truncatingIfNeeded: 0xFF << (8 - kept))
        }
        description = "\(IPRange.format(bytes))/\(prefix)"
    }
}
