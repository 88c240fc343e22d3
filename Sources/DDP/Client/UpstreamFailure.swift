/// Why an attempt to reach the upstream failed, named once for everyone who shows it: the
/// log, `/readyz`, a 503's `details`, the metrics' `cause` label and `ddp-bridge check`.
///
/// A cause is one of a closed set of ``Code``s (`connection-refused`, `upgrade-refused`, …) with
/// the facts that explain it (the address, the HTTP status, the DDP versions); ``message`` says
/// what happened and ``hint`` what to change. The shell classifies the transport's errors into
/// it (DDPClient's `UpstreamFailure+Transport.swift`); the state machine names its own (a DDP
/// `failed`, a handshake or ping deadline). Pure: no I/O, tested without sockets.
public struct UpstreamFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The cause as a closed set of codes, as the metrics' label and `cause.code` report it.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable, CaseIterable {
            case connectionRefused = "connection-refused"
            case nameNotResolved = "name-not-resolved"
            case hostUnreachable = "host-unreachable"
            case timedOut = "timed-out"
            case tlsFailed = "tls-failed"
            case upgradeRefused = "upgrade-refused"
            case upgradeInvalid = "upgrade-invalid"
            case ddpVersionRefused = "ddp-version-refused"
            case messageTooLarge = "message-too-large"
            case protocolViolation = "protocol-violation"
            case connectionClosed = "connection-closed"
            case invalidURL = "invalid-url"
            case connectionFailed = "connection-failed"
        }

        fileprivate let base: Base

        /// Nothing listens at the address (the port is closed).
        public static let connectionRefused = Code(base: .connectionRefused)
        /// The host name does not resolve.
        public static let nameNotResolved = Code(base: .nameNotResolved)
        /// No route to the host or its network.
        public static let hostUnreachable = Code(base: .hostUnreachable)
        /// A stage of the attempt (TCP, TLS, the WebSocket upgrade, the DDP handshake) or a ping had no answer in time.
        public static let timedOut = Code(base: .timedOut)
        /// The TLS handshake failed (the certificate did not verify, the port speaks no TLS, …).
        public static let tlsFailed = Code(base: .tlsFailed)
        /// The WebSocket upgrade was answered with an HTTP status other than 101.
        public static let upgradeRefused = Code(base: .upgradeRefused)
        /// The answer to the upgrade was not a valid WebSocket handshake (or not HTTP at all).
        public static let upgradeInvalid = Code(base: .upgradeInvalid)
        /// The upstream answered `connect` with `failed`: no DDP version both sides speak.
        public static let ddpVersionRefused = Code(base: .ddpVersionRefused)
        /// The upstream sent a message over the size limit.
        public static let messageTooLarge = Code(base: .messageTooLarge)
        /// The upstream broke the WebSocket protocol.
        public static let protocolViolation = Code(base: .protocolViolation)
        /// The upstream closed the connection.
        public static let connectionClosed = Code(base: .connectionClosed)
        /// The upstream URL is not a `ws://` or `wss://` URL.
        public static let invalidURL = Code(base: .invalidURL)
        /// Anything else the transport reported.
        public static let connectionFailed = Code(base: .connectionFailed)

        /// Every code, for documentation and tests.
        public static var all: [Code] { Base.allCases.map { Code(base: $0) } }

        public var description: String { base.rawValue }
    }

    /// How far an attempt got when it failed.
    package enum Stage: Sendable, Equatable {
        /// Opening the TCP connection.
        case tcp
        /// The TLS handshake (`wss://`).
        case tls
        /// The HTTP request asking for the WebSocket upgrade, and its answer.
        case upgrade
        /// `connect` sent, waiting for `connected`.
        case handshake
        /// Connected.
        case open
    }

    /// What went wrong, with what its message and hint need.
    package enum Cause: Sendable, Equatable {
        case connectionRefused(endpoint: String)
        case nameNotResolved(host: String)
        case hostUnreachable(endpoint: String, detail: String)
        case timedOut(Stage, after: Duration)
        /// The TLS library's reason, e.g. "certificate verify failed".
        case tlsFailed(String)
        case upgradeRefused(status: Int, contentType: String?)
        case upgradeInvalid(String)
        /// A `failed` naming `offered`; `ours` are the versions the bridge speaks.
        case versionRefused(offered: String, ours: [String])
        /// A `failed` naming the very version the bridge offered.
        case versionRefusedItself(String)
        /// A `failed` naming another version each time.
        case versionUnstable(offered: String)
        case messageTooLarge(limit: Int)
        case protocolViolation(String)
        case closed(Stage)
        case invalidURL
        case other(String)
    }

    package let cause: Cause
    /// The upstream URL the attempt went to, when known: a hint may name a corrected one.
    public let url: String?

    package init(_ cause: Cause, url: String? = nil) {
        self.cause = cause
        self.url = url
    }

    /// The same failure, naming `url` (when it named none).
    package func naming(_ url: String?) -> UpstreamFailure {
        self.url == nil ? UpstreamFailure(cause, url: url) : self
    }

    /// Whether the cause says what is wrong, rather than that an answer was slow or the
    /// connection went away: nothing listens, the name does not resolve, no route, the TLS
    /// handshake or the WebSocket upgrade was refused, the versions do not match, the URL is
    /// wrong. A request waiting for the upstream fails at once with such a cause; after a
    /// timeout, a close or a broken message it waits on (to its own deadline) for the next
    /// attempt, which a busy or restarting upstream often answers.
    public var isDefinite: Bool {
        switch cause {
        case .connectionRefused, .nameNotResolved, .hostUnreachable, .tlsFailed, .upgradeRefused,
            .upgradeInvalid, .versionRefused, .versionRefusedItself, .versionUnstable, .invalidURL:
            true
        case .timedOut, .messageTooLarge, .protocolViolation, .closed, .other:
            false
        }
    }

    public var code: Code {
        switch cause {
        case .connectionRefused: .connectionRefused
        case .nameNotResolved: .nameNotResolved
        case .hostUnreachable: .hostUnreachable
        case .timedOut: .timedOut
        case .tlsFailed: .tlsFailed
        case .upgradeRefused: .upgradeRefused
        case .upgradeInvalid: .upgradeInvalid
        case .versionRefused, .versionRefusedItself, .versionUnstable: .ddpVersionRefused
        case .messageTooLarge: .messageTooLarge
        case .protocolViolation: .protocolViolation
        case .closed: .connectionClosed
        case .invalidURL: .invalidURL
        case .other: .connectionFailed
        }
    }

    /// The HTTP status of an upgrade that was answered but not accepted.
    public var httpStatus: Int? {
        if case .upgradeRefused(let status, _) = cause { return status }
        return nil
    }

    /// What happened, in a sentence without a capital or a full stop (it follows a colon).
    public var message: String {
        switch cause {
        case .connectionRefused(let endpoint):
            return "nothing is listening at \(endpoint) (connection refused)"
        case .nameNotResolved(let host):
            return "the host name '\(host)' does not resolve"
        case .hostUnreachable(let endpoint, let detail):
            return "\(endpoint) cannot be reached (\(detail))"
        case .timedOut(let stage, let after):
            let within = Self.format(after)
            switch stage {
            case .tcp: return "the TCP connection was not accepted within \(within)"
            case .tls: return "the TLS handshake did not finish within \(within)"
            case .upgrade: return "the WebSocket upgrade request\(pathShown) got no answer within \(within)"
            case .handshake: return "the upstream did not answer the DDP handshake within \(within)"
            case .open: return "the upstream did not answer a ping within \(within)"
            }
        case .tlsFailed(let reason):
            return "the TLS handshake failed: \(reason)"
        case .upgradeRefused(let status, let contentType):
            let type = contentType.map { " (\(Self.mediaType($0)))" } ?? ""
            return "the upstream answered the WebSocket upgrade\(pathShown) with HTTP \(status)\(type) instead of 101 Switching Protocols"
        case .upgradeInvalid(let what):
            return "the answer to the WebSocket upgrade is not a valid WebSocket handshake: \(what)"
        case .versionRefused(let offered, let ours):
            return
                "the upstream supports no DDP version we speak (it offered '\(Self.shown(offered))'; the bridge speaks \(ours.joined(separator: ", ")))"
        case .versionRefusedItself(let version):
            return "the upstream refused DDP version '\(Self.shown(version))', which it names itself"
        case .versionUnstable(let offered):
            return "the upstream keeps changing the DDP version it asks for (now '\(Self.shown(offered))')"
        case .messageTooLarge(let limit):
            return "the upstream sent a message over the size limit of \(limit) bytes"
        case .protocolViolation(let what):
            return "the upstream broke the WebSocket protocol: \(what)"
        case .closed(let stage):
            switch stage {
            case .tcp, .upgrade: return "the upstream closed the connection before answering the WebSocket upgrade"
            case .tls: return "the upstream closed the connection during the TLS handshake"
            case .handshake: return "the upstream closed the connection during the DDP handshake"
            case .open: return "the upstream closed the connection"
            }
        case .invalidURL:
            return "not a ws:// or wss:// URL with a host: \(url ?? "(none)")"
        case .other(let what):
            return "the connection failed: \(what)"
        }
    }

    /// What to change, when the cause suggests something; `nil` when it does not.
    public var hint: String? {
        let suggested = url.flatMap(Self.websocketURL(suggestedFor:))
        let addPath = suggested.map { "add /websocket to the upstream URL (Meteor serves DDP there): \($0)" }
        switch cause {
        case .connectionRefused:
            return "start the Meteor app, or correct the host and port of the upstream URL"
        case .nameNotResolved:
            return "correct the host name of the upstream URL (in a container: the app's service name, on a network the bridge shares)"
        case .hostUnreachable:
            return "check the upstream URL's address and the network between the bridge and the app"
        case .timedOut(.tcp, _):
            return "check the upstream URL's host and port, and that no firewall drops the connection"
        case .timedOut(.tls, _):
            return "check that the port speaks TLS (a plain port takes ws://, not wss://)"
        case .timedOut(.upgrade, _), .closed(.upgrade), .closed(.tcp):
            // A TLS port closes (or waits) on a plain request.
            let plain = url?.lowercased().hasPrefix("ws://") == true ? "if the port expects TLS, use wss://; otherwise: " : ""
            return addPath
                ?? plain
                + "the server takes connections but does not answer a WebSocket upgrade: is it the Meteor app, and does any proxy in front of it pass WebSocket upgrades?"
        case .timedOut(.handshake, _):
            return addPath ?? "the server took the WebSocket but does not speak DDP: point the upstream URL at the Meteor app's /websocket"
        case .timedOut(.open, _), .closed(.handshake), .closed(.open), .other:
            return nil
        case .tlsFailed(let reason):
            return Self.tlsHint(reason)
        case .closed(.tls):
            return "check that the port speaks TLS (a plain port takes ws://, not wss://)"
        case .upgradeRefused(let status, let contentType):
            return Self.upgradeHint(status: status, contentType: contentType, addPath: addPath)
        case .upgradeInvalid:
            if url?.lowercased().hasPrefix("ws://") == true {
                return "if the port expects TLS, use wss://; otherwise a proxy between the bridge and the app may rewrite the handshake"
            }
            return "a proxy between the bridge and the app may rewrite the WebSocket handshake"
        case .versionRefused, .versionRefusedItself, .versionUnstable:
            return "the upstream is not a DDP server the bridge can talk to (Meteor speaks DDP 1): check that the upstream URL names the Meteor app"
        case .messageTooLarge:
            return "raise --upstream-max-message-size, or publish smaller documents"
        case .protocolViolation:
            return "a proxy between the bridge and the app may be altering WebSocket frames"
        case .invalidURL:
            return "the upstream URL looks like ws://host:3000/websocket (wss:// for TLS)"
        }
    }

    public var description: String { message + (hint.map { "; \($0)" } ?? "") }

    // MARK: - Pieces of the text

    /// " for /path" when the URL is known.
    private var pathShown: String {
        guard let url, let path = Self.path(of: url) else { return "" }
        return " for \(path)"
    }

    private static func upgradeHint(status: Int, contentType: String?, addPath: String?) -> String {
        let page = (200..<300).contains(status) && mediaType(contentType ?? "") == "text/html"
        if let addPath { return (page ? "that is a web page, not DDP; " : "") + addPath }
        switch status {
        case 101: return "a proxy between the bridge and the app may rewrite the WebSocket handshake"
        case 300..<400: return "the server redirects: an https site takes wss://, and a moved app its new address"
        case 401, 403: return "the server (or a proxy in front of it) refuses the bridge: let WebSocket connections from it through"
        case 404: return "nothing serves this path here: is it the Meteor app, and does any proxy in front of it pass /websocket?"
        case 500..<600: return "the app, or a proxy in front of it, failed: see its logs"
        default:
            return page
                ? "the answer is a web page, not DDP: a proxy in front of the app may not pass WebSocket upgrades"
                : "is this the Meteor app, and does any proxy in front of it pass WebSocket upgrades?"
        }
    }

    private static func tlsHint(_ reason: String) -> String {
        let lowered = reason.lowercased()
        if lowered.contains("wrong version number") || lowered.contains("wrong_version_number") || lowered.contains("record") {
            return "the port does not seem to speak TLS: for a plain port use ws://"
        }
        if lowered.contains("host") && lowered.contains("name") {
            return "use the host name the certificate names in the upstream URL"
        }
        return "trust the app's CA with --upstream-ca-file, or (test setups only) accept any certificate with --upstream-allow-self-signed"
    }

    /// `text/html` from `text/html; charset=utf-8`.
    static func mediaType(_ contentType: String) -> String {
        String(contentType.split(separator: ";", maxSplits: 1).first ?? "").trimmed().lowercased()
    }

    /// A version as shown: at most 32 characters of what the upstream sent.
    static func shown(_ version: String) -> String {
        version.count > 32 ? String(version.prefix(32)) + "…" : version
    }

    /// "15 s", "0.3 s".
    package static func format(_ duration: Duration) -> String {
        let seconds = duration.seconds
        let tenths = (seconds * 10).rounded() / 10
        return tenths == tenths.rounded() && abs(tenths) < 1e15 ? "\(Int64(tenths)) s" : "\(tenths) s"
    }

    /// The path (and query) of a URL: `/` when it has none; `nil` when it is not a URL.
    package static func path(of url: String) -> String? {
        guard let schemeEnd = url.firstRange(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        guard let start = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) else { return "/" }
        let path = rest[start...]
        return path.hasPrefix("/") ? String(path) : "/" + path
    }

    /// The URL with `/websocket` added to its path, when its path does not already end so
    /// (Meteor serves DDP at `/websocket`, after its `ROOT_URL` path, if any); `nil` when it does.
    package static func websocketURL(suggestedFor url: String) -> String? {
        guard let schemeEnd = url.firstRange(of: "://") else { return nil }
        let rest = url[schemeEnd.upperBound...]
        let pathStart = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let tailStart = rest[pathStart...].firstIndex(where: { $0 == "?" || $0 == "#" }) ?? rest.endIndex
        var path = rest[pathStart..<tailStart]
        while path.hasSuffix("/") { path = path.dropLast() }
        guard !path.lowercased().hasSuffix("/websocket") else { return nil }
        return String(url[..<pathStart]) + path + "/websocket" + rest[tailStart...]
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate func trimmed() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }
}
