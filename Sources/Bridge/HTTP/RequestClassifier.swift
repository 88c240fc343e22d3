/// How the front door takes a request, decided once from its head (``FrontDoor``). Pure: the
/// head's text only (no HTTP types, so the fuzzer compiles this file with `QueryString.swift`
/// alone), work in proportion to the head's size, no JSON, no lock.
enum RequestDecision: Equatable, Sendable {
    /// `GET /healthz` or `GET /readyz`, answered at the door.
    case probe(Probe)
    /// A plain `GET` of an event stream path: opened at the door when nothing must be waited
    /// for, refused there when what is wrong is known from the head, else the router's.
    case stream(StreamDoor)
    /// A stream request refused from its target alone (``TargetProblem``), as the router refuses it.
    case refuse(TargetProblem, StreamDoor)
    /// The router's. `closes`: the connection ends after the answer (`Connection: close`, or an
    /// upgrade, which the bridge does not offer).
    case router(closes: Bool)

    enum Probe: Equatable, Sendable {
        case health, readiness
    }

    enum StreamDoor: Equatable, Sendable {
        case session, `public`

        /// The route's path, its metrics label.
        var path: String { self == .session ? "/v1/events" : "/v1/public/events" }
    }
}

/// What is wrong with a request target from its text alone: past its length (414), or a query
/// parameter that does not decode (400).
enum TargetProblem: Equatable, Sendable {
    case tooLong(length: Int)
    case undecodable(parameter: String)
}

/// A request head as the classifier reads it: the strings the decision needs.
struct RequestHead: Sendable {
    var method: String
    /// The request target as sent: the path and query.
    var target: String
    var contentLength: String?
    var hasTransferEncoding = false
    var hasOrigin = false
    var hasUpgrade = false
    /// The `Connection` header's values.
    var connection: [String] = []

    /// `close` among the `Connection` header's tokens, in any case (RFC 9112 §9.6).
    var asksToClose: Bool {
        connection.contains { value in
            value.split(separator: ",").contains { Self.isClose($0) }
        }
    }

    /// `close`, spaces and tabs around it allowed, in any case.
    private static func isClose(_ token: Substring) -> Bool {
        var bytes = token.utf8[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
        // ASCII letters only compare equal to `close` once lower-cased (`| 0x20`).
        return bytes.count == 5 && zip(bytes, "close".utf8).allSatisfy { ($0 | 0x20) == $1 }
    }

    /// A `GET` without a body, an `Origin` (CORS is the router's) or an upgrade: the only
    /// requests the door answers itself.
    var isPlainGet: Bool {
        method == "GET" && (contentLength ?? "0") == "0" && !hasTransferEncoding && !hasOrigin && !hasUpgrade
    }
}

enum RequestClassifier {
    /// The longest request target taken: 64 KiB.
    static let maximumTargetBytes = 64 * 1024

    /// The decision for `head`: a probe, a stream, a refusal or the router's, in that order of
    /// checks; nothing but a plain `GET` is answered at the door.
    static func classify(_ head: RequestHead) -> RequestDecision {
        let closes = head.asksToClose || head.hasUpgrade
        guard head.isPlainGet else { return .router(closes: closes) }
        switch head.target {
        case "/healthz": return .probe(.health)
        case "/readyz": return .probe(.readiness)
        default: break
        }
        let door: RequestDecision.StreamDoor
        switch path(of: head.target) {
        case "/v1/events": door = .session
        case "/v1/public/events": door = .public
        default: return .router(closes: closes)
        }
        // A request that asks to close is the router's: a stream would never end it.
        guard !closes else { return .router(closes: true) }
        if let problem = problem(head.target) { return .refuse(problem, door) }
        return .stream(door)
    }

    /// The verbs the router knows by name (each path answers the ones it does not take 405).
    static let routerVerbs = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]

    /// The verb a request for the router is routed as: verbs are tokens without end, and the
    /// router knows a path's by name, so one it knows on no path (`QUERY`, `PROPFIND`, any
    /// token) goes as `TRACE`, which no path takes either: 405 with the path's `Allow` where the
    /// path exists, 404 where it does not, as for any other verb. `nil`: as it was sent.
    static func routedVerb(for method: String) -> String? {
        routerVerbs.contains(method) ? nil : "TRACE"
    }

    /// The path of a target: before its query.
    static func path(of target: String) -> Substring {
        target.firstIndex(of: "?").map { target[..<$0] } ?? target[...]
    }

    /// The query of a target, if it has one.
    static func query(of target: String) -> Substring? {
        target.firstIndex(of: "?").map { target[target.index(after: $0)...] }
    }

    /// What is wrong with `target` from its text alone, if anything (the same on every door).
    static func problem(_ target: String) -> TargetProblem? {
        let length = target.utf8.count
        if length > maximumTargetBytes { return .tooLong(length: length) }
        if let query = query(of: target), let bad = QueryString.firstUndecodableParameter(String(query)) {
            return .undecodable(parameter: bad)
        }
        return nil
    }
}
