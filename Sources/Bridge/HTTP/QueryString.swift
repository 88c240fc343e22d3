import Foundation

/// The query string and `Last-Event-ID` as the bridge reads them, without HTTP types (so the
/// fuzzer compiles this file on its own): `application/x-www-form-urlencoded` pairs (`+` is a
/// space), percent-decoded as UTF-8; a name or value that does not decode is an error, never
/// skipped.
enum QueryString {
    /// `+` as space, then percent-decoding; `nil` for bad escapes or bytes that are not UTF-8.
    static func decode(_ text: Substring) -> String? {
        String.decoding(text.utf8, plusIsSpace: true)
    }

    /// The raw name of the first parameter whose name or value does not decode, if any.
    static func firstUndecodableParameter(_ query: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if decode(parts[0]) == nil { return String(parts[0].prefix(64)) }
            if parts.count == 2, decode(parts[1]) == nil { return decode(parts[0]) ?? String(parts[0].prefix(64)) }
        }
        return nil
    }

    /// The first value of parameter `name` (`""` when it has no `=`), or `nil`.
    static func value(_ query: String, _ name: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard decode(parts[0]) == name else { continue }
            return parts.count == 2 ? decode(parts[1]) : ""
        }
        return nil
    }

    /// Every parameter of `query`, each name and value decoded once; the first value of a name
    /// wins. `nil` when a name or a value does not decode. Work in proportion to the query's length.
    static func parameters(_ query: Substring) -> [String: String]? {
        var values: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]) else { return nil }
            guard let value = parts.count == 2 ? decode(parts[1]) : "" else { return nil }
            if values[name] == nil { values[name] = value }
        }
        return values
    }

    /// A `Last-Event-ID` (header or `lastEventId` parameter): a decimal event id, spaces around allowed.
    static func eventID(_ text: String) -> UInt64? {
        UInt64(text.trimmingCharacters(in: .whitespaces))
    }
}

extension String {
    /// The text with `%XX` escapes decoded as UTF-8 bytes; `nil` for a broken escape. (Ours, not
    /// Foundation's `removingPercentEncoding`: plain byte work, the same on every platform.)
    var percentDecoded: String? { Self.decoding(utf8, plusIsSpace: false) }

    /// `bytes` with `%XX` escapes decoded (and `+` as a space when `plusIsSpace`), as UTF-8;
    /// `nil` for a broken escape or bytes that are not UTF-8. Text with neither is taken as is.
    static func decoding<Bytes: Collection<UInt8>>(_ bytes: Bytes, plusIsSpace: Bool) -> String? {
        let plus: UInt8? = plusIsSpace ? UInt8(ascii: "+") : nil
        guard bytes.contains(where: { $0 == UInt8(ascii: "%") || $0 == plus }) else { return String(decoding: bytes, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexDigit), let low = iterator.next().flatMap(hexDigit) else { return nil }
                decoded.append(high << 4 | low)
            } else {
                decoded.append(byte == plus ? UInt8(ascii: " ") : byte)
            }
        }
        return String(validating: decoded, as: UTF8.self)
    }

    /// The value of one hex digit (`0-9`, `a-f`, `A-F`); `nil` for anything else, signs included.
    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
