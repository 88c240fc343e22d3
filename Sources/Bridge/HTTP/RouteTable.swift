import HTTPTypes

/// The bridge's paths and their verbs, so any other verb on a known path gets 405 with `Allow`.
struct RouteTable: Sendable {
    private var routes: [(pattern: [Substring], methods: [HTTPRequest.Method])] = []

    mutating func add(_ method: HTTPRequest.Method, _ path: String) {
        let pattern = path.split(separator: "/")
        if let i = routes.firstIndex(where: { $0.pattern == pattern }) {
            routes[i].methods.append(method)
        } else {
            routes.append((pattern, [method]))
        }
    }

    /// The verbs a path accepts (`:param` matches one segment, `**` the rest); `nil` for unknown paths.
    func methods(for path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "?", maxSplits: 1).first.map { $0.split(separator: "/") } ?? []
        var allowed: [HTTPRequest.Method] = []
        for route in routes where Self.matches(route.pattern, segments) {
            allowed += route.methods.filter { !allowed.contains($0) }
        }
        if allowed.contains(.get) && !allowed.contains(.head) { allowed.append(.head) }
        return allowed.isEmpty ? nil : allowed
    }

    private static func matches(_ pattern: [Substring], _ segments: [Substring]) -> Bool {
        for (i, part) in pattern.enumerated() {
            if part == "**" { return segments.count > i }
            guard i < segments.count else { return false }
            if !part.hasPrefix(":") && part != segments[i] { return false }
        }
        return pattern.count == segments.count
    }
}
