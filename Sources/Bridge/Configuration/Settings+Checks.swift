import Foundation

/// The checks of settings whose text is more than a number or a choice: an upstream URL, a folder.
extension Settings {
    static func upstreamURL(_ value: Value) throws(Invalid) -> String {
        if let problem = upstreamURLProblem(value.text) { throw value.invalid(problem) }
        return value.text
    }

    /// What is wrong with an upstream URL, in words that say what to write instead; `nil` when
    /// it is a usable `ws://` or `wss://` URL: a host, and a port (if any) from 1 to 65535.
    public static func upstreamURLProblem(_ text: String) -> String? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            return "must be a ws:// or wss:// URL with a host, got '\(text)'"
        }
        if scheme == "http" || scheme == "https" {
            // A Meteor developer's ROOT_URL: DDP is served over WebSocket at /websocket of the same address.
            var suggestion = (scheme == "http" ? "ws" : "wss") + String(text.dropFirst(scheme.count))
            if url.path.isEmpty || url.path == "/" {
                while suggestion.hasSuffix("/") { suggestion.removeLast() }
                suggestion += "/websocket"
            }
            return "must be a ws:// or wss:// URL (Meteor serves DDP over WebSocket at /websocket), got '\(text)': use \(suggestion)"
        }
        guard scheme == "ws" || scheme == "wss" else { return "must be a ws:// or wss:// URL with a host, got '\(text)'" }
        if let port = explicitPort(text), !(1...65_535).contains(port ?? 0) {
            return "must have a port from 1 to 65535, got '\(text)'"
        }
        if scheme == "wss", host.allSatisfy({ $0.isNumber || $0 == "." || $0 == ":" }) {
            return "must name a host, not an IP address, when it is wss:// (TLS sends the host name), got '\(text)'"
        }
        return nil
    }

    /// The port written in a URL's authority: `nil` when none is written, `.some(nil)` when what is
    /// written is not a number that fits (a parser would otherwise take some other port, or none).
    static func explicitPort(_ text: String) -> Int?? {
        guard let start = text.range(of: "://")?.upperBound else { return nil }
        let authority = text[start...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostAndPort = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority
        // After an IPv6 literal's closing bracket, or after the last colon of a name.
        let afterHost: Substring
        if hostAndPort.hasPrefix("["), let close = hostAndPort.firstIndex(of: "]") {
            afterHost = hostAndPort[hostAndPort.index(after: close)...]
        } else if let colon = hostAndPort.lastIndex(of: ":") {
            afterHost = hostAndPort[colon...]
        } else {
            afterHost = ""
        }
        guard afterHost.hasPrefix(":") else { return nil }
        let digits = afterHost.dropFirst()
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return .some(nil) }
        return .some(Int(digits))
    }

    /// `path` when it names a folder, else `nil`.
    public static func existingFolder(_ path: String) -> String? {
        var isFolder: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue ? path : nil
    }
}
