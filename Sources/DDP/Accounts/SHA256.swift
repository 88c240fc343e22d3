import CLibCrypto

/// SHA-256 through the system's libcrypto.
public enum SHA256Digest {
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        func digest(_ input: UnsafeBufferPointer<UInt8>) {
            out.withUnsafeMutableBufferPointer { outBuf in
                _ = SHA256(input.baseAddress, input.count, outBuf.baseAddress)
            }
        }
        if bytes.withContiguousStorageIfAvailable(digest) == nil {
            Array(bytes).withUnsafeBufferPointer(digest)
        }
        return out
    }

    /// Lower-case hex of the SHA-256 of a string's UTF-8 bytes (Meteor's password digest).
    /// On the request path (session tokens are looked up by it), so built straight from bytes.
    public static func hex(_ text: String) -> String { hex(bytes: text.utf8) }

    /// Lower-case hex of the SHA-256 of bytes.
    public static func hex(bytes: some Collection<UInt8>) -> String {
        let digest = hash(bytes)
        return String(unsafeUninitializedCapacity: digest.count * 2) { out in
            for (i, byte) in digest.enumerated() {
                out[2 * i] = hexDigits[Int(byte >> 4)]
                out[2 * i + 1] = hexDigits[Int(byte & 0x0F)]
            }
            return digest.count * 2
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
