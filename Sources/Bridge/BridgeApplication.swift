import DDP
public import Hummingbird
import HummingbirdCore
public import Logging
public import NIOCore
import ServiceLifecycle

/// The bridge as a Hummingbird application: the REST routes, the JSON error shape, and the
/// session registry running as one of the application's services.
public enum BridgeApplication {
    public static var version: String { BuildInfo.version }

    public static func make(
        configuration: BridgeConfiguration,
        runtime: BridgeRuntime = BridgeRuntime(),
        http: ApplicationConfiguration,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        onMetricsListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> (application: Application<RouterResponder<BridgeRequestContext>>, registry: SessionRegistry) {
        let registry = SessionRegistry(settings: configuration.registrySettings, runtime: runtime, logger: logger)
        // The commonest slip: the app's own address, without the path Meteor serves DDP at.
        if let suggested = UpstreamFailure.websocketURL(suggestedFor: configuration.upstream) {
            logger.notice(
                "the upstream URL's path is not /websocket, where Meteor serves DDP",
                metadata: ["upstream": "\(configuration.upstream)", "suggested": "\(suggested)"])
        }
        let probe = ReadinessProbe(
            upstream: configuration.upstreamSettings, runtime: runtime, logger: logger, metrics: registry.metrics, pacer: registry.pacer)
        let router = Router(context: BridgeRequestContext.self, options: .autoGenerateHeadEndpoints)
        let fanout = PublicFanout(
            settings: configuration.publicFanoutSettings, runtime: runtime, logger: logger, metrics: registry.metrics, pacer: registry.pacer,
            budget: registry.budget,
            streams: registry.liveStreams)
        // The soft open-file limit (often 1024) up to the hard one, before the connection limit is derived from it.
        let files = ConnectionAdmission.raiseOpenFileLimit()
        if files.after > files.before {
            logger.info("raised the open-file limit", metadata: ["from": "\(files.before)", "to": "\(files.after)"])
        }
        let admission = ConnectionAdmission(limits: configuration.admissionLimits, budget: registry.budget) {
            registry.count + fanout.connectionCount + 1  // sessions, the public pool, the readiness probe
        }
        logger.info(
            "client connections are bounded",
            metadata: [
                "limit": "\(admission.limit)", "per-address": "\(admission.perAddressLimit)", "open-files": "\(ConnectionAdmission.openFileLimit())"
            ])
        let mcp = MCPSessions(
            maxSessions: configuration.mcpMaxSessions, maxPerAddress: configuration.maxSessionsPerAddress,
            idleTimeout: configuration.sessionIdleTimeout, notifyInterval: configuration.mcpNotifyInterval,
            places: (
                take: { [registry] client throws(BridgeError) in try registry.takeMCPPlace(for: client) },
                release: { [registry] in registry.releaseMCPPlace(for: $0) }
            ), budget: registry.budget)
        let routes = BridgeRoutes(
            settings: configuration.routeSettings, registry: registry, probe: probe, fanout: fanout, admission: admission, mcp: mcp)
        let ownOrigins = OwnOrigins(configured: configuration.publicOrigins)
        router.middlewares.add(RequestTracing())
        router.middlewares.add(RequestMetricsMiddleware(metrics: registry.metrics))
        if !configuration.corsOrigins.isEmpty { router.middlewares.add(CORSGate(origins: Set(configuration.corsOrigins))) }
        router.middlewares.add(SecurityHeadersMiddleware())
        router.middlewares.add(ErrorShapeMiddleware(clock: runtime.clock))
        router.middlewares.add(RequestHygieneMiddleware(settings: configuration.hygieneSettings, own: ownOrigins))
        if let console = ConsoleFiles.middleware(configuration.console, logger: logger) {
            // Innermost: a path no route takes is looked up among the console's files.
            router.middlewares.add(console)
            let from: String
            if case .folder(let folder) = configuration.console { from = folder } else { from = "built into the binary" }
            logger.info("web console served at /", metadata: ["files": "\(from)"])
        }
        routes.register(on: router)
        // Every request is decided by the front door on its connection's event loop (probes and
        // streams answered there); the rest run as tasks of the request runner, through the router.
        let metrics = registry.metrics
        let date = HTTPDate(clock: runtime.clock)
        let runner = RequestRunner(responder: router.buildResponder(), date: date, serverName: http.serverName, logger: logger)
        let rooms = FrontDoor.Rooms(
            answer: routes.probeAnswer, openStream: routes.openStreamOnLoop, route: runner.submit,
            answered: { path, status in metrics.countRequest(route: path, status: Int(status.code)) },
            bodyLimit: configuration.maxBodySize, date: date)
        let server = HTTPServerBuilder { _ in
            BridgeChildChannel(
                admission: admission, refused: { metrics.connectionRefused(reason: $0 == .tooManyFromAddress ? "address" : "total") },
                idleTimeout: configuration.readTimeout, rooms: rooms)
        }
        // The bridge's own origins are known once it listens (before any connection is taken).
        let running: @Sendable (any Channel) async -> Void = { channel in
            // The listening socket keeps accepting while the request path is saturated.
            try? await channel.pipeline.addHandler(AcceptWhileBusy(), position: .first)
            let origins = ownOrigins.bound(to: channel.localAddress)
            if origins.isEmpty, configuration.console != .none {
                logger.notice("no public origin: the web console cannot log in or write until --public-origin names where it is opened")
            } else {
                logger.info("public origins", metadata: ["origins": "\(origins.joined(separator: ", "))"])
            }
            await onServerRunning(channel)
        }
        // How late the event loops run what is due on them (the metric that says nothing holds them).
        let lateness = EventLoopLateness(group: runtime.eventLoopGroup, factory: metrics.factory, logger: logger)
        var services: [any Service] = [registry, fanout, probe, lateness, runner]
        if let listener = configuration.metricsListener {
            services.append(routes.metricsApplication(listener, logger: logger, onRunning: onMetricsListening))
        }
        let application = Application(
            router: router, server: server, configuration: http, services: services, onServerRunning: running,
            eventLoopGroupProvider: .shared(runtime.eventLoopGroup), logger: logger)
        return (application, registry)
    }
}
