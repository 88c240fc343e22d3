#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An IPv4 or IPv6 address range in CIDR notation (`10.0.0.0/8`, `::1`, `fd00::/8`): the
/// reverse proxies whose `X-Forwarded-For` entries the bridge trusts.
public struct IPRange: Sendable, Equatable, CustomStringConvertible {
    let bytes: [UInt8]
    let prefix: Int

    /// `nil` for anything that is not an address or a CIDR range.
    public init?(_ text: Substring) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.parse(parts[0]) else { return nil }
        let most = bytes.count * 8
        if parts.count == 2 {
            guard let prefix = Int(parts[1]), (0...most).contains(prefix) else { return nil }
            self.prefix = prefix
        } else {
            self.prefix = most
        }
        self.bytes = bytes
    }

    public var description: String { "\(Self.format(bytes))/\(prefix)" }

    public func contains(_ address: Substring) -> Bool {
        guard let other = Self.parse(address), other.count == bytes.count else { return false }
        var remaining = prefix
        for (a, b) in zip(bytes, other) where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if a & mask != b & mask { return false }
            remaining -= bits
        }
        return true
    }

    /// 4 or 16 bytes; an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) is its IPv4 address.
    static func parse(_ text: Substring) -> [UInt8]? {
        var text = String(text)
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        guard !text.isEmpty, text.utf8.count <= 64 else { return nil }
        // Into plain bytes (an `in_addr` is 4 of them, an `in6_addr` 16).
        var v4 = [UInt8](repeating: 0, count: 4)
        if inet_pton(AF_INET, text, &v4) == 1 { return v4 }
        var bytes = [UInt8](repeating: 0, count: 16)
        guard inet_pton(AF_INET6, text, &bytes) == 1 else { return nil }
        if bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return Array(bytes.suffix(4)) }
        return bytes
    }

    static func format(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: bytes.count, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}

/// Who the end user is, behind zero or more reverse proxies.
public enum ClientAddress {
    /// The address of the client: the direct peer, unless the peer is a trusted proxy; then the
    /// rightmost `X-Forwarded-For` entry that is not a trusted proxy (entries to its left were
    /// written by the client and prove nothing). `trustPeer` trusts the direct peer whatever it is
    /// (one proxy in front, the deprecated `--trust-forwarded-for`).
    public static func resolve(peer: String, forwardedFor: [String], trusted: [IPRange], trustPeer: Bool = false) -> String {
        func isTrusted(_ address: Substring) -> Bool { trusted.contains { $0.contains(address) } }
        guard trustPeer || isTrusted(Substring(peer)) else { return peer }
        let entries = forwardedFor.flatMap { $0.split(separator: ",") }.map { RequestInput.trimmed($0) }.filter { !$0.isEmpty }
        for entry in entries.reversed() {
            guard IPRange.parse(entry) != nil else { return String(entry.prefix(64)) }  // not an address: stop trusting here
            if !isTrusted(entry) { return String(entry) }
        }
        // Every hop is a trusted proxy: the leftmost one is as far as we can see.
        return entries.first.map(String.init) ?? peer
    }
}
