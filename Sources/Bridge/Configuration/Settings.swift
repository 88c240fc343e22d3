import BridgeStore
import DDP
public import DDPClient
import Foundation

/// The bridge's settings. Each is declared once, in ``Settings/all``: its flag, its help, how its
/// text is checked and where the value goes; its `DDP_BRIDGE_…` variable is derived from the flag,
/// and its default is the value ``Settings/init()`` holds (from ``BridgeConfiguration``), which the
/// help shows. `serve` and `demo` read them alike: a flag wins over its variable, which wins over
/// a preset (the demo's), which wins over the default. A bad value fails with a message naming
/// the setting; every number is range-checked before it is converted, so no setting traps.
public struct Settings: Sendable {
    public struct Invalid: Error, CustomStringConvertible, Equatable {
        public let description: String

        public init(description: String) { self.description = description }
    }

    public var host = "127.0.0.1"
    public var port = 8080
    public var logLevel = "info"
    public var logFormat = "human"
    /// `--metrics-host`, applied to ``BridgeConfiguration/metricsListener`` once every setting is read.
    var metricsHost: String?
    /// The OpenTelemetry collector traces go to (``TraceExport``); `nil`: none (unless `OTEL_EXPORTER_OTLP_ENDPOINT`).
    public var otlpEndpoint: String?
    /// The settings file (`--config`), read through ``SettingsSources``.
    public var configFile: String?
    /// The secrets folder (`--secrets-dir`), read through ``SettingsSources``.
    public var secretsDirectory: String?
    public var configuration = BridgeConfiguration(upstream: "")

    /// The defaults (no upstream yet).
    public init() {}

    /// Resolves every setting from `flags` (by flag name, without `--`), then `environment`
    /// (`DDP_BRIDGE_…`), then `presets` (by flag name), then the default.
    public init(flags: [String: String], environment: [String: String], presets: [String: String] = [:]) throws(Invalid) {
        try self.init(sources: SettingsSources(flags: flags, environment: environment, presets: presets))
    }

    /// Resolves every setting from its sources, in their order (``SettingsSources``), then the default.
    public init(sources: SettingsSources) throws(Invalid) {
        self.init()
        for setting in Self.all {
            guard let (text, source) = try sources.text(for: setting) else { continue }
            var value = Value(setting: setting, text: text, source: source)
            // Whatever comes from the secrets folder is kept out of messages, as a secret setting is.
            if source == SettingsSources.Source.secrets { value.isSecret = true }
            do {
                try setting.apply(value, &self)
            } catch let error as Invalid {
                throw value.redacted(error)
            } catch {
                throw value.redacted(value.invalid("is not valid (\(error))"))
            }
        }
        guard !configuration.upstream.isEmpty else {
            throw Invalid(description: "--upstream (DDP_BRIDGE_UPSTREAM) is required: the Meteor app's ws://host:port/websocket")
        }
        if configuration.requestTimeout > configuration.maxRequestTimeout { configuration.maxRequestTimeout = configuration.requestTimeout }
        if metricsHost != nil, configuration.metricsListener == nil {
            throw Invalid(description: "--metrics-host (DDP_BRIDGE_METRICS_HOST) needs --metrics-port (DDP_BRIDGE_METRICS_PORT)")
        }
        configuration.metricsListener?.host = metricsHost ?? host
        if let listener = configuration.metricsListener, listener.port != 0, listener.port == port, listener.host == host {
            throw Invalid(description: "--metrics-port (DDP_BRIDGE_METRICS_PORT) must differ from --port (DDP_BRIDGE_PORT): both are \(port)")
        }
    }

    /// The setting of that flag, if there is one.
    public static func setting(named flag: String) -> Setting? { all.first { $0.flag == flag } }

    /// The setting of that flag, for the bridge's own names of ``all`` (`config`, `secrets-dir`);
    /// a name that is none gives a setting that sets nothing, with no secret.
    static func setting(_ flag: String) -> Setting {
        all.first { $0.flag == flag } ?? custom(flag, "", show: { _ in nil }) { _, _ in }
    }

    /// One setting, declared once.
    public struct Setting: Sendable {
        public let flag: String
        public let help: String
        /// May be given as a bare `--flag`, meaning true.
        public let isSwitch: Bool
        /// Its value is a secret: never shown in help, logs or messages.
        public var isSecret = false
        let show: @Sendable (Settings) -> String?
        let apply: @Sendable (Value, inout Settings) throws -> Void

        public var environment: String { Self.environmentName(flag) }

        /// `DDP_BRIDGE_` and the flag, upper case, `_` for `-`.
        static func environmentName(_ flag: String) -> String { "DDP_BRIDGE_" + flag.uppercased().replacingOccurrences(of: "-", with: "_") }
        /// The same setting, its value a secret.
        var secret: Setting {
            var setting = self
            setting.isSecret = true
            return setting
        }

        /// The default as help shows it; `nil` when there is none.
        public var shownDefault: String? { show(Settings()) }
    }

    /// A setting's text, with the names to blame when it is bad.
    struct Value {
        let flag: String
        let environment: String
        let text: String
        /// Where it was given (``SettingsSources``), named in a message when it is a file.
        var source: String?
        var isSecret = false

        init(setting: Setting, text: String, source: String? = nil) {
            self.flag = setting.flag
            self.environment = setting.environment
            self.text = text
            self.source = source
            self.isSecret = setting.isSecret
        }

        /// A message about a secret names neither its text nor a part of it.
        func redacted(_ error: Invalid) -> Invalid {
            guard isSecret, !text.isEmpty else { return error }
            return Invalid(description: error.description.replacingOccurrences(of: text, with: "<secret>"))
        }

        func invalid(_ problem: String) -> Invalid {
            // "--flag (VARIABLE) must be …" or "--flag (VARIABLE): 'x' is not …", and where it was
            // given when that is a file.
            let files = [SettingsSources.Source.settingsFile, SettingsSources.Source.secrets]
            let given = source.flatMap { files.contains($0) ? " (given in \($0))" : nil }
            return Invalid(description: "--\(flag) (\(environment))\(given ?? "")\(problem.hasPrefix(":") ? "" : " ")\(problem)")
        }

        func number(minimum: Double = 0, maximum: Double = 86_400 * 365) throws(Invalid) -> Double {
            guard let n = Double(text), n.isFinite, n >= minimum, n <= maximum else {
                throw invalid("must be a number from \(Self.format(minimum)) to \(Self.format(maximum)), got '\(text)'")
            }
            return n
        }

        func seconds(minimum: Double = 0) throws(Invalid) -> Duration {
            .milliseconds(Int64((try number(minimum: minimum) * 1000).rounded()))
        }

        func integer(minimum: Int = 1, maximum: Int = 1 << 40) throws(Invalid) -> Int {
            guard let n = Int(text), n >= minimum, n <= maximum else {
                throw invalid("must be a whole number from \(minimum) to \(maximum), got '\(text)'")
            }
            return n
        }

        func bool() throws(Invalid) -> Bool {
            switch text.lowercased() {
            case "true", "1", "yes", "on": return true
            case "false", "0", "no", "off": return false
            default: throw invalid("must be true or false, got '\(text)'")
            }
        }

        func oneOf(_ choices: [String]) throws(Invalid) -> String {
            guard choices.contains(text) else {
                throw invalid("must be \(choices.dropLast().joined(separator: ", ")) or \(choices.last ?? ""), got '\(text)'")
            }
            return text
        }

        static func format(_ n: Double) -> String {
            n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        }
    }

    // MARK: - Declaring settings

    static func seconds(_ flag: String, _ help: String, _ path: any WritableKeyPath<Settings, Duration> & Sendable, minimum: Double = 0) -> Setting {
        Setting(flag: flag, help: help, isSwitch: false, show: { Self.secondsText($0[keyPath: path]) }) { value, settings in
            settings[keyPath: path] = try value.seconds(minimum: minimum)
        }
    }

    static func integer(
        _ flag: String, _ help: String, _ path: any WritableKeyPath<Settings, Int> & Sendable, minimum: Int = 1, maximum: Int = 1 << 40
    ) -> Setting {
        Setting(flag: flag, help: help, isSwitch: false, show: { String($0[keyPath: path]) }) { value, settings in
            settings[keyPath: path] = try value.integer(minimum: minimum, maximum: maximum)
        }
    }

    static func toggle(_ flag: String, _ help: String, _ path: any WritableKeyPath<Settings, Bool> & Sendable) -> Setting {
        Setting(flag: flag, help: help, isSwitch: true, show: { String($0[keyPath: path]) }) { value, settings in
            settings[keyPath: path] = try value.bool()
        }
    }

    static func custom(
        _ flag: String, _ help: String, show: @escaping @Sendable (Settings) -> String?,
        apply: @escaping @Sendable (Value, inout Settings) throws -> Void
    ) -> Setting {
        Setting(flag: flag, help: help, isSwitch: false, show: show, apply: apply)
    }

    static func secondsText(_ duration: Duration) -> String {
        Value.format(duration.seconds)
    }

    /// Every setting of `serve` and `demo`.
    public static let all: [Setting] = [
        custom(
            "config",
            "YAML or JSON file of settings, one key per setting named as its flag (port: 8080); the command line, the environment and --secrets-dir win over it. Read again when it changes: --log-level takes effect at once",
            show: { _ in nil }
        ) { value, settings in settings.configFile = value.text },
        custom(
            "secrets-dir",
            "Folder of secrets (/run/secrets), one file per setting named as its flag or variable (session-key or DDP_BRIDGE_SESSION_KEY), its text trimmed; wins over --config",
            show: { _ in nil }
        ) { value, settings in settings.secretsDirectory = value.text },
        custom("upstream", "The Meteor app's DDP WebSocket, e.g. ws://meteor:3000/websocket (wss:// for TLS)", show: { _ in nil }) {
            value, settings in
            settings.configuration.upstream = try upstreamURL(value)
        },
        custom("host", "Address to listen on", show: { $0.host }) { value, settings in settings.host = value.text },
        integer("port", "Port to listen on", \.port, minimum: 0, maximum: 65_535),
        custom(
            "metrics-port",
            "Port of a listener of its own for /metrics, /healthz and /readyz (then /metrics is not on --port); none by default",
            show: { _ in nil }
        ) { value, settings in
            guard value.text != "none" else { return }
            let port = try value.integer(minimum: 0, maximum: 65_535)
            settings.configuration.metricsListener = MetricsListener(port: port)
        },
        custom("metrics-host", "Address the --metrics-port listener listens on (default: --host's)", show: { _ in nil }) { value, settings in
            settings.metricsHost = value.text
        },
        custom("upstream-ca-file", "PEM file of CA certificates to trust for wss://", show: { _ in nil }) { value, settings in
            guard FileManager.default.isReadableFile(atPath: value.text) else { throw value.invalid(": cannot read '\(value.text)'") }
            settings.configuration.upstreamTLS.caFile = value.text
        },
        toggle("upstream-allow-self-signed", "Accept any upstream certificate (test setups only)", \.configuration.upstreamTLS.allowSelfSigned),
        toggle("upstream-compression", "Negotiate permessage-deflate with the upstream", \.configuration.upstreamCompression),
        seconds("connect-timeout", "Seconds a new session waits for the upstream before answering 503", \.configuration.connectTimeout, minimum: 0.1),
        seconds("request-timeout", "Default seconds a method call or subscription waits", \.configuration.requestTimeout, minimum: 0.1),
        seconds(
            "read-timeout", "Seconds a client may take to send a request, or stay idle between requests (open streams excepted)",
            \.configuration.readTimeout, minimum: 0.1),
        seconds("shutdown-grace", "Seconds requests in flight get to finish on SIGTERM/SIGINT before sessions close", \.configuration.shutdownGrace),
        seconds(
            "session-idle-timeout", "Seconds without requests or streams before a session closes", \.configuration.sessionIdleTimeout, minimum: 1),
        seconds("subscription-linger", "Seconds an unused shared subscription is kept", \.configuration.subscriptionLinger),
        integer("max-sessions", "Sessions in total", \.configuration.maxSessions),
        integer("max-sessions-per-address", "Sessions per client address", \.configuration.maxSessionsPerAddress),
        integer("max-subscriptions-per-session", "Subscriptions per session", \.configuration.maxSubscriptionsPerSession),
        integer(
            "max-subscription-params-size", "Bytes of JSON a session subscription's name and params may take (kept for the session's life)",
            \.configuration.maxSubscriptionParamsSize, minimum: 64, maximum: 1 << 30),
        integer("max-streams-per-session", "Open event streams per session", \.configuration.maxStreamsPerSession),
        custom(
            "mcp-tools", "JSON file of the Meteor methods /mcp offers as tools (name, description, inputSchema); none without it",
            show: { _ in nil }
        ) { value, settings in
            let text: String
            do { text = try String(contentsOfFile: value.text, encoding: .utf8) } catch { throw value.invalid(": cannot read '\(value.text)'") }
            do { settings.configuration.mcpTools = try MCPToolCatalog.parse(text) } catch { throw value.invalid(": \(error)") }
        },
        custom("mcp-path", "Path of the MCP endpoint", show: { $0.configuration.mcpPath }) { value, settings in
            let path = value.text
            let plain = path.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || [0x2D, 0x2E, 0x5F, 0x2F].contains(byte)
            }
            guard path.hasPrefix("/"), path.count > 1, !path.hasSuffix("/"), !path.contains("//"), plain else {
                throw value.invalid(": '\(path)' is not a path like /mcp (letters, digits, - _ . and /)")
            }
            guard !(path == "/v1" || path.hasPrefix("/v1/")), !["/healthz", "/readyz", "/metrics", "/openapi.yaml", "/openapi.json"].contains(path)
            else {
                throw value.invalid(": '\(path)' is one of the bridge's own paths")
            }
            settings.configuration.mcpPath = path
        },
        integer("mcp-max-sessions", "MCP sessions held at once (each address within --max-sessions-per-address)", \.configuration.mcpMaxSessions),
        seconds(
            "mcp-notify-interval", "Seconds between two notifications of one MCP resource (changes meanwhile make one)",
            \.configuration.mcpNotifyInterval, minimum: 0.01),
        custom(
            "memory-budget",
            "Bytes the documents held for clients may take in all, by estimate (default: half the cgroup memory limit, or of the machine's memory)",
            show: { $0.configuration.memoryBudget.map(String.init) }
        ) { value, settings in
            settings.configuration.memoryBudget = try value.integer(minimum: 1 << 20, maximum: 1 << 50)
        },
        custom(
            "memory-share-per-address", "Percent of the memory budget one client address may hold",
            show: { Value.format($0.configuration.memoryShareAddress) }
        ) { value, settings in settings.configuration.memoryShareAddress = try value.number(minimum: 0.01, maximum: 100) },
        custom(
            "memory-share-anonymous",
            "Percent of the memory budget one client address may hold with anonymous sessions (at most the address's share)",
            show: { Value.format($0.configuration.memoryShareAnonymous) }
        ) { value, settings in settings.configuration.memoryShareAnonymous = try value.number(minimum: 0.01, maximum: 100) },
        custom(
            "max-connections",
            "Client connections held open at once (default: the open-file limit less a reserve and the upstream connections open)",
            show: { $0.configuration.maxConnections.map(String.init) }
        ) { value, settings in
            settings.configuration.maxConnections = try value.integer(maximum: 10_000_000)
        },
        integer(
            "max-connections-per-address", "Client connections one address may hold open (a trusted proxy's count only in the total)",
            \.configuration.maxConnectionsPerAddress, maximum: 10_000_000),
        integer("max-body-size", "Largest request body in bytes", \.configuration.maxBodySize, minimum: 64),
        custom(
            "login-rate-limit", "Failed logins per client address per minute, on every route that logs in",
            show: { String($0.configuration.loginRateLimit.calls) }
        ) { value, settings in
            settings.configuration.loginRateLimit = (try value.integer(), .seconds(60))
        },
        custom("session-rate-limit", "Session creations per client address per 10 s", show: { String($0.configuration.sessionRateLimit.calls) }) {
            value, settings in settings.configuration.sessionRateLimit = (try value.integer(), .seconds(10))
        },
        custom(
            "reconnect-rate", "Upstream reconnect attempts per second across all sessions (0: unpaced)",
            show: { Value.format($0.configuration.reconnectRate) }
        ) { value, settings in
            settings.configuration.reconnectRate = try value.number(maximum: 1_000_000)
        },
        integer(
            "reconnect-burst", "Upstream reconnect attempts allowed at once before the rate applies", \.configuration.reconnectBurst,
            maximum: 1_000_000),
        seconds(
            "query-time-budget", "Seconds one collection query may scan before it is refused (422)", \.configuration.queryTimeBudget,
            minimum: 0.01),
        // NIO takes frame limits of at most 32 bits; a message over 1 GiB is no DDP message.
        integer(
            "upstream-max-message-size", "Largest DDP message accepted from the upstream, in bytes", \.configuration.upstreamMaxMessageSize,
            minimum: 1024, maximum: 1 << 30),
        toggle(
            "trust-forwarded-for", "Deprecated (one proxy in front): trust the direct peer's X-Forwarded-For; prefer --trusted-proxies",
            \.configuration.trustForwardedFor),
        custom(
            "trusted-proxies",
            "Comma-separated addresses or CIDR ranges of your reverse proxies; the client address is the rightmost X-Forwarded-For entry not among them",
            show: { _ in nil }
        ) { value, settings in
            var ranges: [IPRange] = []
            for entry in value.text.split(separator: ",") {
                let text = entry.trimmingCharacters(in: .whitespaces)
                guard !text.isEmpty else { continue }
                guard let range = IPRange(Substring(text)) else { throw value.invalid(": '\(text)' is not an IP address or CIDR range") }
                ranges.append(range)
            }
            settings.configuration.trustedProxies = ranges
        },
        integer(
            "ipv6-client-prefix",
            "Leading bits of an IPv6 client's address that name the client for every per-address limit (64: a /64 is one client)",
            \.configuration.ipv6ClientPrefix, minimum: 1, maximum: 128),
        custom(
            "batch-window", "Milliseconds over which changes are consolidated per document",
            // Fractional milliseconds (microsecond precision), not `wholeMilliseconds`' truncation.
            show: { Value.format(Double($0.configuration.batchWindow / .microseconds(1)) / 1000) }
        ) {
            value, settings in settings.configuration.batchWindow = .microseconds(Int64((try value.number(maximum: 60_000) * 1000).rounded()))
        },
        integer("event-log-size", "Events a session keeps for resuming streams", \.configuration.eventLogSize),
        integer(
            "event-log-bytes", "Bytes of events a session keeps for resuming streams (oldest dropped first)", \.configuration.eventLogBytes,
            minimum: 1024),
        custom(
            "session-max-documents",
            "Most documents one session may hold; past it, the subscriptions still loading (or the newest) are stopped with too-many-documents",
            show: { $0.configuration.ddp.maxCachedDocuments.map(String.init) }
        ) { value, settings in
            settings.configuration.ddp.maxCachedDocuments = try value.integer(maximum: 1_000_000_000)
        },
        seconds("heartbeat-interval", "Seconds between heartbeat comments on idle streams", \.configuration.heartbeatInterval, minimum: 0.1),
        integer("stream-buffer-limit", "Bytes a stream may fall behind before it is cut off", \.configuration.streamBufferLimit, minimum: 1024),
        seconds(
            "stream-stall-timeout", "Seconds a stream's replay or snapshot may wait on a reader that takes nothing before it is cut off",
            \.configuration.streamStallTimeout, minimum: 0.01),
        custom(
            "public-publications",
            "Publications anyone may read without a session, comma-separated: name (no parameters), name(string,integer) (these parameter types), name(*) (any); none by default",
            show: { _ in nil }
        ) { value, settings in
            do throws(PublicPublications.Invalid) {
                settings.configuration.publicPublications = try PublicPublications(parsing: value.text)
            } catch {
                throw value.invalid(": \(error)")
            }
        },
        integer(
            "public-connections",
            "0 (the default): each distinct public subscription on an anonymous upstream connection of its own, so readers see exactly their publication; N: the subscriptions share N connections, and readers of subscriptions on one connection see the union of what they publish",
            \.configuration.publicConnections, minimum: 0, maximum: 100_000),
        integer(
            "public-max-subscriptions", "Distinct public subscriptions (publication + params) at once", \.configuration.publicMaxSubscriptions,
            maximum: 100_000),
        integer(
            "public-max-subscriptions-per-address",
            "Distinct public subscriptions one client address may make while they are held (reading one that exists is free)",
            \.configuration.publicMaxSubscriptionsPerAddress, minimum: 1, maximum: 100_000),
        integer("public-max-readers", "Open public streams in all", \.configuration.publicMaxReaders, maximum: 10_000_000),
        integer(
            "public-max-readers-per-address", "Open public streams per client address", \.configuration.publicMaxReadersPerAddress,
            maximum: 10_000_000),
        integer(
            "public-max-age", "Seconds caches may keep a public collection read (Cache-Control max-age; 0: revalidate each time)",
            \.configuration.publicMaxAge, minimum: 0, maximum: 86_400),
        custom(
            "public-dir",
            "Folder of the web console served at / ('none' to serve no console). By default, the console built into the binary",
            show: { _ in nil }
        ) { value, settings in
            guard value.text != "none" else {
                settings.configuration.console = .none
                return
            }
            guard let folder = existingFolder(value.text) else { throw value.invalid(": '\(value.text)' is not a folder") }
            // Absolute, so the start's log says which folder it is.
            settings.configuration.console = .folder(URL(fileURLWithPath: folder).standardizedFileURL.path)
        },
        custom(
            "cors-origins",
            "Comma-separated origins allowed from browsers, with credentials (the session cookie); * admits any other origin without credentials (bearer tokens only); none by default",
            show: { _ in nil }
        ) { value, settings in
            let origins = value.text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for origin in origins where origin != "*" {
                guard let url = URL(string: origin), ["http", "https"].contains(url.scheme ?? ""), url.host != nil, url.path.isEmpty else {
                    throw value.invalid(": '\(origin)' is not an origin like https://app.example.com")
                }
            }
            settings.configuration.corsOrigins = origins
        },
        custom(
            "mcp-allowed-origins",
            "Comma-separated origins of browser pages allowed to use the MCP endpoint besides the bridge's own and --cors-origins; none by default",
            show: { _ in nil }
        ) { value, settings in
            let origins = value.text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            var normalized: [String] = []
            for origin in origins {
                guard let origin = OriginPolicy.normalized(origin) else {
                    throw value.invalid(": '\(origin)' is not an origin like https://agent.example.com")
                }
                normalized.append(origin)
            }
            settings.configuration.mcpAllowedOrigins = Set(normalized)
        },
        custom(
            "public-origin",
            "Comma-separated origins the bridge's own pages (the web console) are opened from, e.g. https://bridge.example.com: a browser write from one of them is same-origin; 'none' for none (default: the listening address, http://HOST:PORT, and http://localhost:PORT on a loopback address; none on a wildcard address)",
            show: { _ in nil }
        ) { value, settings in
            let origins = value.text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard origins != ["none"] else {
                settings.configuration.publicOrigins = []
                return
            }
            settings.configuration.publicOrigins = try origins.map { origin in
                guard let url = URL(string: origin), url.host != nil, ["", "/"].contains(url.path), let normalized = OriginPolicy.normalized(origin)
                else { throw value.invalid(": '\(origin)' is not an origin like https://bridge.example.com") }
                return normalized
            }
        },
        seconds(
            "store-check-interval",
            "Seconds between looks at the store for a stored session held here, so one another replica ended ends here too",
            \.configuration.storeCheckInterval, minimum: 0.05),
        seconds(
            "store-timeout",
            "Seconds one session store operation may take before it counts as failed (sessions then go on in memory)",
            \.configuration.storeTimeout, minimum: 0.1),
        custom(
            "cookie-secure",
            "When the session cookie carries Secure: auto (when a trusted proxy says X-Forwarded-Proto: https), always or never",
            show: { $0.configuration.cookieSecurity.rawValue }
        ) { value, settings in
            guard let choice = CookieSecurity(rawValue: value.text) else { throw value.invalid("must be auto, always or never, got '\(value.text)'") }
            settings.configuration.cookieSecurity = choice
        },
        custom(
            "session-store",
            "Where sessions are kept so they survive a restart: sqlite (a file under --data-dir), postgres://user:password@host:port/database (shared by replicas; ?sslmode=disable|prefer|require) or memory; only with --session-key",
            show: { $0.configuration.sessionStore.description }
        ) { value, settings in
            switch value.text {
            case "sqlite": settings.configuration.sessionStore = .sqlite
            case "memory": settings.configuration.sessionStore = .memory
            default:
                switch PostgresLocation.parse(value.text) {
                case .success(let location): settings.configuration.sessionStore = .postgres(location)
                case .failure(let problem): throw value.invalid("must be sqlite, memory or a postgres:// URL; this one \(problem.description)")
                }
            }
        }.secret,
        custom("data-dir", "Folder of the embedded session store (sessions.sqlite)", show: { $0.configuration.dataDirectory }) {
            value, settings in
            guard !value.text.isEmpty else { throw value.invalid("must name a folder") }
            settings.configuration.dataDirectory = value.text
        },
        custom(
            "session-key",
            "32 bytes as 64 hex digits or base64 (openssl rand -hex 32): seals the Meteor login tokens the session store keeps; without it sessions stay in memory only. Every replica needs the same key: a session sealed with another key is answered 503 session-key-mismatch and left in the store",
            show: { _ in nil }
        ) { value, settings in
            guard let key = SessionKey(text: value.text) else {
                throw value.invalid("must be 32 bytes as 64 hex digits or as base64 (make one with: openssl rand -hex 32)")
            }
            settings.configuration.sessionKey = key
        }.secret,
        custom(
            "otlp-endpoint",
            "Base URL of an OpenTelemetry collector (http://collector:4318): traces go to its /v1/traces as OTLP over HTTP; off by default (OTEL_EXPORTER_OTLP_ENDPOINT turns it on too; OTEL_SERVICE_NAME and the other OTEL_ variables are honoured)",
            show: { _ in nil }
        ) { value, settings in
            guard let url = URL(string: value.text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw value.invalid(": '\(value.text)' is not a URL like http://collector:4318")
            }
            settings.otlpEndpoint = value.text
        },
        custom("log-level", "trace, debug, info, notice, warning, error or critical", show: { $0.logLevel }) { value, settings in
            settings.logLevel = try value.oneOf(["trace", "debug", "info", "notice", "warning", "error", "critical"])
        },
        custom("log-format", "human or json (one JSON object per line)", show: { $0.logFormat }) { value, settings in
            settings.logFormat = try value.oneOf(["human", "json"])
        }
    ]
}
