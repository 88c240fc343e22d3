import CLibCrypto
import DDP
import Foundation

/// The key that seals what a session store keeps secret (the Meteor resume token): AES-256-GCM
/// with a random 96-bit nonce per sealing, through the system's libcrypto. A sealed value is
/// `1 | nonce (12) | ciphertext | tag (16)`; the associated data binds it to its session, so a
/// value moved to another row does not open.
public struct SessionKey: Sendable, Equatable {
    let bytes: [UInt8]

    static let version: UInt8 = 1
    static let nonceSize = 12
    static let tagSize = 16

    /// 32 bytes, given as 64 hex digits or as base64; `nil` for anything else.
    public init?(text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.count == 64, let bytes = Self.hex(trimmed) {
            self.bytes = bytes
        } else if let data = Data(base64Encoded: trimmed), data.count == 32 {
            self.bytes = [UInt8](data)
        } else {
            return nil
        }
    }

    /// Only for ``random()``: 32 bytes by construction.
    private init(random bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// A new random key (tests; `ddp-bridge` prints how to make one with openssl).
    static func random() -> SessionKey { SessionKey(random: MeteorRandom.bytes(32)) }

    private static func hex(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2)
        var high: UInt8?
        for c in text.utf8 {
            let nibble: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high {
                bytes.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return high == nil ? bytes : nil
    }

    /// Seals `plaintext`, bound to `context`; `nil` only if libcrypto fails.
    func seal(_ plaintext: [UInt8], context: [UInt8]) -> [UInt8]? {
        let nonce = MeteorRandom.bytes(Self.nonceSize)
        guard let cipher = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(cipher) }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: Self.tagSize)
        var length: Int32 = 0
        var total = 0
        guard EVP_EncryptInit_ex(cipher, EVP_aes_256_gcm(), nil, nil, nil) == 1,
            EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_SET_IVLEN, Int32(Self.nonceSize), nil) == 1,
            EVP_EncryptInit_ex(cipher, nil, nil, bytes, nonce) == 1,
            EVP_EncryptUpdate(cipher, nil, &length, context, Int32(context.count)) == 1,
            EVP_EncryptUpdate(cipher, &out, &length, plaintext, Int32(plaintext.count)) == 1
        else { return nil }
        total = Int(length)
        let final = out.withUnsafeMutableBufferPointer { buffer in
            EVP_EncryptFinal_ex(cipher, buffer.baseAddress! + total, &length)
        }
        guard final == 1 else { return nil }
        total += Int(length)
        guard EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_GET_TAG, Int32(Self.tagSize), &tag) == 1 else { return nil }
        return [Self.version] + nonce + out[..<total] + tag
    }

    /// Opens what ``seal(_:context:)`` made with this key and `context`; `nil` when it does not
    /// open (another key, another context, altered, truncated).
    func open(_ sealed: [UInt8], context: [UInt8]) -> [UInt8]? {
        guard sealed.count >= 1 + Self.nonceSize + Self.tagSize, sealed[0] == Self.version,
            sealed.count - 1 - Self.nonceSize - Self.tagSize <= 1 << 20
        else { return nil }
        let nonce = Array(sealed[1..<(1 + Self.nonceSize)])
        let body = Array(sealed[(1 + Self.nonceSize)..<(sealed.count - Self.tagSize)])
        var tag = Array(sealed[(sealed.count - Self.tagSize)...])
        guard let cipher = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(cipher) }
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0
        guard EVP_DecryptInit_ex(cipher, EVP_aes_256_gcm(), nil, nil, nil) == 1,
            EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_SET_IVLEN, Int32(Self.nonceSize), nil) == 1,
            EVP_DecryptInit_ex(cipher, nil, nil, bytes, nonce) == 1,
            EVP_DecryptUpdate(cipher, nil, &length, context, Int32(context.count)) == 1,
            EVP_DecryptUpdate(cipher, &out, &length, body, Int32(body.count)) == 1
        else { return nil }
        let total = Int(length)
        guard EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_SET_TAG, Int32(Self.tagSize), &tag) == 1 else { return nil }
        let final = out.withUnsafeMutableBufferPointer { buffer in
            EVP_DecryptFinal_ex(cipher, buffer.baseAddress! + total, &length)
        }
        guard final == 1 else { return nil }
        return Array(out[..<(total + Int(length))])
    }
}
