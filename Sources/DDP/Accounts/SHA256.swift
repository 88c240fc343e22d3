import CLibCrypto

/// SHA-256 through the system's libcrypto.
public enum SHA256Digest {
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let input = Array(bytes)
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        input.withUnsafeBufferPointer { inBuf in
            out.withUnsafeMutableBufferPointer { outBuf in
                _ = SHA256(inBuf.baseAddress, inBuf.count, outBuf.baseAddress)
            }
        }
        return out
    }

    /// Lower-case hex of the SHA-256 of a string's UTF-8 bytes (Meteor's password digest).
    public static func hex(_ text: String) -> String {
        hash(Array(text.utf8)).map { byte in
            let hex = Array("0123456789abcdef")
            return String([hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
        }.joined()
    }
}
