import ArgumentParser
import Bridge
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UnixSignals

/// Runs the bridge in front of a Meteor app: every setting has a flag and a `DDP_BRIDGE_…`
/// environment variable (the flag wins); bad values stop it at start, naming the setting.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve REST and Server-Sent Events for the Meteor app at --upstream (the default command)."
    )

    @Option(name: .customLong("upstream"), help: help("upstream")) var upstream: String?
    @Option(name: .customLong("host"), help: help("host")) var host: String?
    @Option(name: .customLong("port"), help: help("port")) var port: String?
    @Option(name: .customLong("upstream-ca-file"), help: help("upstream-ca-file")) var upstreamCaFile: String?
    @Option(name: .customLong("upstream-allow-self-signed"), help: help("upstream-allow-self-signed")) var upstreamAllowSelfSigned: String?
    @Option(name: .customLong("upstream-compression"), help: help("upstream-compression")) var upstreamCompression: String?
    @Option(name: .customLong("connect-timeout"), help: help("connect-timeout")) var connectTimeout: String?
    @Option(name: .customLong("request-timeout"), help: help("request-timeout")) var requestTimeout: String?
    @Option(name: .customLong("read-timeout"), help: help("read-timeout")) var readTimeout: String?
    @Option(name: .customLong("shutdown-grace"), help: help("shutdown-grace")) var shutdownGrace: String?
    @Option(name: .customLong("session-idle-timeout"), help: help("session-idle-timeout")) var sessionIdleTimeout: String?
    @Option(name: .customLong("subscription-linger"), help: help("subscription-linger")) var subscriptionLinger: String?
    @Option(name: .customLong("max-sessions"), help: help("max-sessions")) var maxSessions: String?
    @Option(name: .customLong("max-sessions-per-address"), help: help("max-sessions-per-address")) var maxSessionsPerAddress: String?
    @Option(name: .customLong("max-subscriptions-per-session"), help: help("max-subscriptions-per-session")) var maxSubscriptionsPerSession: String?
    @Option(name: .customLong("max-streams-per-session"), help: help("max-streams-per-session")) var maxStreamsPerSession: String?
    @Option(name: .customLong("max-body-size"), help: help("max-body-size")) var maxBodySize: String?
    @Option(name: .customLong("login-rate-limit"), help: help("login-rate-limit")) var loginRateLimit: String?
    @Option(name: .customLong("session-rate-limit"), help: help("session-rate-limit")) var sessionRateLimit: String?
    @Option(name: .customLong("reconnect-rate"), help: help("reconnect-rate")) var reconnectRate: String?
    @Option(name: .customLong("reconnect-burst"), help: help("reconnect-burst")) var reconnectBurst: String?
    @Option(name: .customLong("query-time-budget"), help: help("query-time-budget")) var queryTimeBudget: String?
    @Option(name: .customLong("upstream-max-message-size"), help: help("upstream-max-message-size")) var upstreamMaxMessageSize: String?
    @Option(name: .customLong("trust-forwarded-for"), help: help("trust-forwarded-for")) var trustForwardedFor: String?
    @Option(name: .customLong("trusted-proxies"), help: help("trusted-proxies")) var trustedProxies: String?
    @Option(name: .customLong("batch-window"), help: help("batch-window")) var batchWindow: String?
    @Option(name: .customLong("event-log-size"), help: help("event-log-size")) var eventLogSize: String?
    @Option(name: .customLong("event-log-bytes"), help: help("event-log-bytes")) var eventLogBytes: String?
    @Option(name: .customLong("session-max-documents"), help: help("session-max-documents")) var sessionMaxDocuments: String?
    @Option(name: .customLong("heartbeat-interval"), help: help("heartbeat-interval")) var heartbeatInterval: String?
    @Option(name: .customLong("stream-buffer-limit"), help: help("stream-buffer-limit")) var streamBufferLimit: String?
    @Option(name: .customLong("public-dir"), help: help("public-dir")) var publicDir: String?
    @Option(name: .customLong("cors-origins"), help: help("cors-origins")) var corsOrigins: String?
    @Option(name: .customLong("log-level"), help: help("log-level")) var logLevel: String?
    @Option(name: .customLong("log-format"), help: help("log-format")) var logFormat: String?

    /// The help of a setting: what it does, its environment variable and its default.
    static func help(_ flag: String) -> ArgumentHelp {
        let setting = Settings.all.first { $0.flag == flag }!
        let fallback = setting.defaultValue.map { " (default: \($0))" } ?? ""
        return ArgumentHelp("\(setting.help) [env: \(setting.environment)]\(fallback)")
    }

    var flags: [String: String] {
        let given: [(String, String?)] = [
            ("upstream", upstream),
            ("host", host),
            ("port", port),
            ("upstream-ca-file", upstreamCaFile),
            ("upstream-allow-self-signed", upstreamAllowSelfSigned),
            ("upstream-compression", upstreamCompression),
            ("connect-timeout", connectTimeout),
            ("request-timeout", requestTimeout),
            ("read-timeout", readTimeout),
            ("shutdown-grace", shutdownGrace),
            ("session-idle-timeout", sessionIdleTimeout),
            ("subscription-linger", subscriptionLinger),
            ("max-sessions", maxSessions),
            ("max-sessions-per-address", maxSessionsPerAddress),
            ("max-subscriptions-per-session", maxSubscriptionsPerSession),
            ("max-streams-per-session", maxStreamsPerSession),
            ("max-body-size", maxBodySize),
            ("login-rate-limit", loginRateLimit),
            ("session-rate-limit", sessionRateLimit),
            ("reconnect-rate", reconnectRate),
            ("reconnect-burst", reconnectBurst),
            ("query-time-budget", queryTimeBudget),
            ("upstream-max-message-size", upstreamMaxMessageSize),
            ("trust-forwarded-for", trustForwardedFor),
            ("trusted-proxies", trustedProxies),
            ("batch-window", batchWindow),
            ("event-log-size", eventLogSize),
            ("event-log-bytes", eventLogBytes),
            ("session-max-documents", sessionMaxDocuments),
            ("heartbeat-interval", heartbeatInterval),
            ("stream-buffer-limit", streamBufferLimit),
            ("public-dir", publicDir),
            ("cors-origins", corsOrigins),
            ("log-level", logLevel),
            ("log-format", logFormat),
        ]
        return Dictionary(uniqueKeysWithValues: given.compactMap { name, value in value.map { (name, $0) } })
    }

    func run() async throws {
        let settings: Settings
        do {
            settings = try Settings(flags: flags, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError(error.description)
        }
        if settings.logFormat == "json" {
            LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
        }
        let logger = try makeLogger(settings.logLevel)
        let host = settings.host
        let (application, registry) = BridgeApplication.make(
            configuration: settings.configuration,
            http: ApplicationConfiguration(address: .hostname(host, port: settings.port), serverName: "ddp-bridge"),
            logger: logger,
            onServerRunning: { channel in
                logger.notice("ddp-bridge listening", metadata: [
                    "address": "http://\(host):\(channel.localAddress?.port ?? settings.port)",
                    "upstream": "\(settings.configuration.upstream)",
                ])
            })
        // The grace service comes last, so it hears of a shutdown first (services stop in reverse).
        let group = ServiceGroup(configuration: .init(services: [application, registry.shutdownGrace], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
