/// Whether bytes are well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
/// past U+10FFFF), without making a string of them: a text message from the upstream must be
/// (RFC 6455 §8.1), and a message may be megabytes. ASCII, most of any DDP message, is checked
/// eight bytes at a time.
enum UTF8Validation {
    static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let count = bytes.count
        var index = 0
        while index < count {
            if index + 8 <= count, bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                index += 8
                continue
            }
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            // The length a lead byte announces, and the range its second byte must be in.
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: (length, low) = (3, 0xA0)  // no overlong three-byte forms
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: (length, high) = (3, 0x9F)  // no surrogates
            case 0xF0: (length, low) = (4, 0x90)  // no overlong four-byte forms
            case 0xF1...0xF3: length = 4
            case 0xF4: (length, high) = (4, 0x8F)  // nothing past U+10FFFF
            default: return false  // a continuation byte, an overlong two-byte lead, or 0xF5 and up
            }
            guard count - index >= length, (low...high).contains(bytes[index + 1]) else { return false }
            for offset in 2..<length where bytes[index + offset] & 0xC0 != 0x80 { return false }
            index += length
        }
        return true
    }
}
