import DDP

/// Session tokens: a fixed prefix and 256 random bits, so they never look like a Meteor
/// login token; the bridge keeps only their SHA-256.
enum SessionToken {
    static let prefix = "ddpb_"

    static func make() -> String { prefix + MeteorRandom.secret() }

    static func isSessionToken(_ token: String) -> Bool { token.hasPrefix(prefix) }

    /// What the registry stores and compares: never the token itself.
    static func hash(_ token: String) -> String { SHA256Digest.hex(token) }
}
