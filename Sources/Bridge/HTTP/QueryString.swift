import Foundation

/// The query string and `Last-Event-ID` as the bridge reads them, without HTTP types (so the
/// fuzzer compiles this file on its own): `application/x-www-form-urlencoded` pairs (`+` is a
/// space), percent-decoded as UTF-8; a name or value that does not decode is an error, never
/// skipped.
enum QueryString {
    /// `+` as space, then percent-decoding; `nil` for bad escapes or bytes that are not UTF-8.
    static func decode(_ text: Substring) -> String? {
        String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
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

    /// A `Last-Event-ID` (header or `lastEventId` parameter): a decimal event id, spaces around allowed.
    static func eventID(_ text: String) -> UInt64? {
        UInt64(text.trimmingCharacters(in: .whitespaces))
    }
}
