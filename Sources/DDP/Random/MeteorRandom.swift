import CLibCrypto

/// Cryptographically secure random ids and secrets (libcrypto's `RAND_bytes`), in Meteor's alphabets.
public enum MeteorRandom {
    /// Meteor's `UNMISTAKABLE_CHARS`: the alphabet of its 17-character ids.
    public static let unmistakableCharacters = Array("23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz")
    /// Meteor's `BASE64_CHARS` (URL-safe), the alphabet of `Random.secret()`.
    public static let base64Characters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
    static let hexCharacters = Array("0123456789abcdef")

    /// `count` bytes from libcrypto's CSPRNG.
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        precondition(ok == 1, "libcrypto RAND_bytes failed: no secure randomness available")
        return out
    }

    /// A string of `count` characters drawn uniformly (rejection sampling, no modulo bias).
    public static func string(count: Int, alphabet: [Character]) -> String {
        precondition(alphabet.count <= 256 && !alphabet.isEmpty)
        let limit = 256 - 256 % alphabet.count
        var out = ""
        out.reserveCapacity(count)
        while out.count < count {
            for byte in bytes(count * 2) where Int(byte) < limit {
                out.append(alphabet[Int(byte) % alphabet.count])
                if out.count == count { break }
            }
        }
        return out
    }

    /// A Meteor-style document id (17 characters, about 99 bits).
    public static func id() -> String { string(count: 17, alphabet: unmistakableCharacters) }

    /// A secret token like Meteor's `Random.secret()` (43 characters, 258 bits).
    public static func secret(count: Int = 43) -> String { string(count: count, alphabet: base64Characters) }

    /// A method `randomSeed`: 20 hex characters, as Meteor's client sends.
    public static func randomSeed() -> String { string(count: 20, alphabet: hexCharacters) }
}
