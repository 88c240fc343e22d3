public import DDPClient
import DDP
import Foundation

/// Reads the bridge's settings from command-line flags and the environment, in one place:
/// a flag wins over its `DDP_BRIDGE_…` variable, which wins over the default. A bad value
/// fails with a message naming the setting.
public struct Settings: Sendable {
    public struct Invalid: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    /// One setting: its flag name (without `--`), its environment variable, its default and what it does.
    public struct Setting: Sendable {
        public let flag: String
        public let help: String
        public let defaultValue: String?
        public var environment: String { "DDP_BRIDGE_" + flag.uppercased().replacingOccurrences(of: "-", with: "_") }
    }

    public static let all: [Setting] = [
        Setting(flag: "upstream", help: "The Meteor app's DDP WebSocket, e.g. ws://meteor:3000/websocket (wss:// for TLS)", defaultValue: nil),
        Setting(flag: "host", help: "Address to listen on", defaultValue: "127.0.0.1"),
        Setting(flag: "port", help: "Port to listen on", defaultValue: "8080"),
        Setting(flag: "upstream-ca-file", help: "PEM file of CA certificates to trust for wss://", defaultValue: nil),
        Setting(flag: "upstream-allow-self-signed", help: "Accept any upstream certificate (test setups only)", defaultValue: "false"),
        Setting(flag: "upstream-compression", help: "Negotiate permessage-deflate with the upstream", defaultValue: "false"),
        Setting(flag: "connect-timeout", help: "Seconds a new session waits for the upstream before answering 503", defaultValue: "10"),
        Setting(flag: "request-timeout", help: "Default seconds a method call or subscription waits", defaultValue: "30"),
        Setting(flag: "read-timeout", help: "Seconds a client may take to send a request, or stay idle between requests (open streams excepted)", defaultValue: "30"),
        Setting(flag: "shutdown-grace", help: "Seconds requests in flight get to finish on SIGTERM/SIGINT before sessions close", defaultValue: "10"),
        Setting(flag: "session-idle-timeout", help: "Seconds without requests or streams before a session closes", defaultValue: "900"),
        Setting(flag: "subscription-linger", help: "Seconds an unused shared subscription is kept", defaultValue: "5"),
        Setting(flag: "max-sessions", help: "Sessions in total", defaultValue: "10000"),
        Setting(flag: "max-sessions-per-address", help: "Sessions per client address", defaultValue: "100"),
        Setting(flag: "max-subscriptions-per-session", help: "Subscriptions per session", defaultValue: "100"),
        Setting(flag: "max-streams-per-session", help: "Open event streams per session", defaultValue: "16"),
        Setting(flag: "max-body-size", help: "Largest request body in bytes", defaultValue: "1048576"),
        Setting(flag: "login-rate-limit", help: "Failed logins per client address per minute, on every route that logs in", defaultValue: "10"),
        Setting(flag: "session-rate-limit", help: "Session creations per client address per 10 s", defaultValue: "100"),
        Setting(flag: "reconnect-rate", help: "Upstream reconnect attempts per second across all sessions (0: unpaced)", defaultValue: "100"),
        Setting(flag: "reconnect-burst", help: "Upstream reconnect attempts allowed at once before the rate applies", defaultValue: "50"),
        Setting(flag: "query-time-budget", help: "Seconds one collection query may scan before it is refused (422)", defaultValue: "2"),
        Setting(flag: "upstream-max-message-size", help: "Largest DDP message accepted from the upstream, in bytes", defaultValue: "16777216"),
        Setting(flag: "trust-forwarded-for", help: "Deprecated (one proxy in front): trust the direct peer's X-Forwarded-For; prefer --trusted-proxies", defaultValue: "false"),
        Setting(flag: "trusted-proxies", help: "Comma-separated addresses or CIDR ranges of your reverse proxies; the client address is the rightmost X-Forwarded-For entry not among them", defaultValue: nil),
        Setting(flag: "batch-window", help: "Milliseconds over which changes are consolidated per document", defaultValue: "1"),
        Setting(flag: "event-log-size", help: "Events a session keeps for resuming streams", defaultValue: "10000"),
        Setting(flag: "event-log-bytes", help: "Bytes of events a session keeps for resuming streams (oldest dropped first)", defaultValue: "8388608"),
        Setting(flag: "session-max-documents", help: "Most documents one session may hold; past it, the subscriptions still loading (or the newest) are stopped with too-many-documents", defaultValue: "100000"),
        Setting(flag: "heartbeat-interval", help: "Seconds between heartbeat comments on idle streams", defaultValue: "15"),
        Setting(flag: "stream-buffer-limit", help: "Bytes a stream may fall behind before it is cut off", defaultValue: "1048576"),
        Setting(flag: "public-dir", help: "Folder of the web console served at / ('none' to serve no console)", defaultValue: "public"),
        Setting(flag: "cors-origins", help: "Comma-separated origins allowed from browsers, with credentials (the session cookie); * admits any other origin without credentials (bearer tokens only); none by default", defaultValue: nil),
        Setting(flag: "log-level", help: "trace, debug, info, notice, warning, error or critical", defaultValue: "info"),
        Setting(flag: "log-format", help: "human or json (one JSON object per line)", defaultValue: "human"),
    ]

    /// `path` when it names a folder, else `nil`.
    public static func existingFolder(_ path: String) -> String? {
        var isFolder: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue ? path : nil
    }

    public let host: String
    public let port: Int
    public let logLevel: String
    public let logFormat: String
    public let configuration: BridgeConfiguration

    /// Resolves every setting from `flags` (by flag name) and `environment`.
    public init(flags: [String: String], environment: [String: String]) throws(Invalid) {
        func value(_ flag: String) -> String? {
            let setting = Self.all.first { $0.flag == flag }!
            return flags[flag] ?? environment[setting.environment] ?? setting.defaultValue
        }
        func environmentName(_ flag: String) -> String { Self.all.first { $0.flag == flag }?.environment ?? flag }
        // Every number is range-checked before it is converted: a setting never traps.
        func number(_ flag: String, minimum: Double = 0, maximum: Double = 86_400 * 365) throws(Invalid) -> Double {
            guard let text = value(flag), let n = Double(text), n.isFinite, n >= minimum, n <= maximum else {
                throw Invalid(description: "--\(flag) (\(environmentName(flag))) must be a number from \(minimum) to \(maximum), got '\(value(flag) ?? "")'")
            }
            return n
        }
        func seconds(_ flag: String, minimum: Double = 0) throws(Invalid) -> Duration {
            .milliseconds(Int64((try number(flag, minimum: minimum) * 1000).rounded()))
        }
        func integer(_ flag: String, minimum: Int = 1, maximum: Int = 1 << 40) throws(Invalid) -> Int {
            guard let text = value(flag), let n = Int(text), n >= minimum, n <= maximum else {
                throw Invalid(description: "--\(flag) (\(environmentName(flag))) must be a whole number from \(minimum) to \(maximum), got '\(value(flag) ?? "")'")
            }
            return n
        }
        func flag(_ name: String) throws(Invalid) -> Bool {
            switch value(name)?.lowercased() {
            case "true", "1", "yes", "on": return true
            case "false", "0", "no", "off", nil: return false
            case let other?: throw Invalid(description: "--\(name) must be true or false, got '\(other)'")
            }
        }
        guard let upstream = value("upstream"), !upstream.isEmpty else {
            throw Invalid(description: "--upstream (DDP_BRIDGE_UPSTREAM) is required: the Meteor app's ws://host:port/websocket")
        }
        guard let url = URL(string: upstream), ["ws", "wss"].contains(url.scheme ?? ""), url.host != nil else {
            throw Invalid(description: "--upstream (DDP_BRIDGE_UPSTREAM) must be a ws:// or wss:// URL with a host, got '\(upstream)'")
        }
        if url.scheme == "wss", let host = url.host, host.allSatisfy({ $0.isNumber || $0 == "." || $0 == ":" }) {
            throw Invalid(description: "--upstream: a wss:// URL must name a host, not an IP address (TLS sends the host name), got '\(upstream)'")
        }
        let caFile = value("upstream-ca-file")
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw Invalid(description: "--upstream-ca-file (DDP_BRIDGE_UPSTREAM_CA_FILE): cannot read '\(caFile)'")
        }
        let port = try integer("port", minimum: 0)
        guard port <= 65_535 else { throw Invalid(description: "--port must be from 0 to 65535, got \(port)") }
        let level = value("log-level") ?? "info"
        guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(level) else {
            throw Invalid(description: "--log-level must be trace, debug, info, notice, warning, error or critical, got '\(level)'")
        }
        let format = value("log-format") ?? "human"
        guard ["human", "json"].contains(format) else {
            throw Invalid(description: "--log-format (DDP_BRIDGE_LOG_FORMAT) must be human or json, got '\(format)'")
        }
        var configuration = BridgeConfiguration(upstream: upstream)
        configuration.upstreamTLS = DDPClientOptions.TLS(caFile: caFile, allowSelfSigned: try flag("upstream-allow-self-signed"))
        configuration.upstreamCompression = try flag("upstream-compression")
        configuration.connectTimeout = try seconds("connect-timeout", minimum: 0.1)
        configuration.requestTimeout = try seconds("request-timeout", minimum: 0.1)
        configuration.readTimeout = try seconds("read-timeout", minimum: 0.1)
        configuration.shutdownGrace = try seconds("shutdown-grace")
        configuration.sessionIdleTimeout = try seconds("session-idle-timeout", minimum: 1)
        configuration.subscriptionLinger = try seconds("subscription-linger")
        configuration.maxSessions = try integer("max-sessions")
        configuration.maxSessionsPerAddress = try integer("max-sessions-per-address")
        configuration.maxSubscriptionsPerSession = try integer("max-subscriptions-per-session")
        configuration.maxStreamsPerSession = try integer("max-streams-per-session")
        configuration.maxBodySize = try integer("max-body-size", minimum: 64)
        configuration.loginRateLimit = (try integer("login-rate-limit"), .seconds(60))
        configuration.sessionRateLimit = (try integer("session-rate-limit"), .seconds(10))
        configuration.reconnectRate = try number("reconnect-rate", maximum: 1_000_000)
        configuration.reconnectBurst = try integer("reconnect-burst", maximum: 1_000_000)
        configuration.queryTimeBudget = try seconds("query-time-budget", minimum: 0.01)
        // NIO takes frame limits of at most 32 bits; a message over 1 GiB is no DDP message.
        configuration.upstreamMaxMessageSize = try integer("upstream-max-message-size", minimum: 1024, maximum: 1 << 30)
        configuration.trustForwardedFor = try flag("trust-forwarded-for")
        for entry in (value("trusted-proxies") ?? "").split(separator: ",") {
            let text = entry.trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty else { continue }
            guard let range = IPRange(Substring(text)) else {
                throw Invalid(description: "--trusted-proxies (DDP_BRIDGE_TRUSTED_PROXIES): '\(text)' is not an IP address or CIDR range")
            }
            configuration.trustedProxies.append(range)
        }
        configuration.batchWindow = .microseconds(Int64((try number("batch-window", maximum: 60_000) * 1000).rounded()))
        configuration.eventLogSize = try integer("event-log-size")
        configuration.eventLogBytes = try integer("event-log-bytes", minimum: 1024, maximum: 1 << 40)
        configuration.ddp.maxCachedDocuments = try integer("session-max-documents", maximum: 1_000_000_000)
        configuration.heartbeatInterval = try seconds("heartbeat-interval", minimum: 0.1)
        configuration.streamBufferLimit = try integer("stream-buffer-limit", minimum: 1024)
        configuration.corsOrigins = (value("cors-origins") ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for origin in configuration.corsOrigins where origin != "*" {
            guard let url = URL(string: origin), ["http", "https"].contains(url.scheme ?? ""), url.host != nil, url.path.isEmpty else {
                throw Invalid(description: "--cors-origins (DDP_BRIDGE_CORS_ORIGINS): '\(origin)' is not an origin like https://app.example.com")
            }
        }
        switch value("public-dir") ?? "none" {
        case "none", "": configuration.publicFolder = nil
        case let folder:
            // The default folder may simply be absent (the console is optional); a folder named on purpose must exist.
            configuration.publicFolder = Self.existingFolder(folder)
            let named = flags["public-dir"] != nil || environment["DDP_BRIDGE_PUBLIC_DIR"] != nil
            if configuration.publicFolder == nil, named {
                throw Invalid(description: "--public-dir (DDP_BRIDGE_PUBLIC_DIR): '\(folder)' is not a folder")
            }
        }
        if configuration.requestTimeout > configuration.maxRequestTimeout { configuration.maxRequestTimeout = configuration.requestTimeout }
        self.host = value("host") ?? "127.0.0.1"
        self.port = port
        self.logLevel = level
        self.logFormat = format
        self.configuration = configuration
    }
}
