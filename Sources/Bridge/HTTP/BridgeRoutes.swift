import DDP
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The REST surface. Each route family lives in its own extension file.
struct BridgeRoutes: Sendable {
    let settings: Settings
    let registry: SessionRegistry
    let probe: ReadinessProbe
    let fanout: PublicFanout
    let admission: ConnectionAdmission
    let mcp: MCPSessions
    var runtime: BridgeRuntime { registry.runtime }

    typealias Handler = @Sendable (Request, BridgeRequestContext) async throws -> Response

    /// Every route: verb, path and handler.
    var routes: [(method: HTTPRequest.Method, path: String, handler: Handler)] {
        // `/metrics` is on the API's listener unless it has one of its own (`--metrics-port`).
        var routes: [(method: HTTPRequest.Method, path: String, handler: Handler)] = [
            (.get, "/healthz", { _, _ in ProbeAnswer.health.response }),
            (.get, "/readyz", { _, _ in readiness.response }),
            (.get, "/openapi.yaml", { _, _ in Self.contract(EmbeddedDocuments.openAPIYAML, "application/yaml; charset=utf-8") }),
            (.get, "/openapi.json", { _, _ in Self.contract(EmbeddedDocuments.openAPIJSON, "application/json") }),
            (.post, "/v1/sessions", createSession),
            (.get, "/v1/session", getSession),
            (.delete, "/v1/session", deleteSession),
            (.post, "/v1/session/login", login),
            (.post, "/v1/session/logout", logout),
            (.post, "/v1/users", createUser),
            (.post, "/v1/methods/**", callMethod),
            (.post, "/v1/subscriptions", subscribe),
            (.get, "/v1/subscriptions", listSubscriptions),
            (.delete, "/v1/subscriptions", unsubscribeByName),
            (.delete, "/v1/subscriptions/:id", unsubscribe),
            (.get, "/v1/collections", listCollections),
            (.get, "/v1/collections/:name", queryCollection),
            (.post, "/v1/collections/:name", insertDocument),
            (.get, "/v1/collections/:name/:id", getDocument),
            (.patch, "/v1/collections/:name/:id", updateDocument),
            (.delete, "/v1/collections/:name/:id", removeDocument),
            (.get, "/v1/events", events),
            (.head, "/v1/events", eventsHead),
            (.get, "/v1/public/publications", publicPublications),
            (.get, "/v1/public/events", publicEvents),
            (.head, "/v1/public/events", publicEventsHead),
            (.get, "/v1/public/collections/:name", publicCollection),
            (.post, settings.mcpPath, mcpPost),
            (.get, settings.mcpPath, mcpStream),
            (.head, settings.mcpPath, mcpStreamHead),
            (.delete, settings.mcpPath, mcpDelete)
        ]
        if settings.metricsListener == nil { routes.insert((.get, "/metrics", { _, _ in scrape() }), at: 2) }
        return routes
    }

    /// The Prometheus scrape of `/metrics`.
    func scrape() -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.metrics.scrape(registry, probe: probe, fanout: fanout, admission: admission))))
    }

    /// The listener of `--metrics-port`: `/metrics`, `/healthz` and `/readyz`, nothing else.
    func metricsApplication(_ listener: MetricsListener, logger: Logger, onRunning: @escaping @Sendable (Int) async -> Void)
        -> some Service
    {
        let router = Router()
        router.get("/metrics") { _, _ in scrape() }
        router.get("/healthz") { _, _ in ProbeAnswer.health.response }
        router.get("/readyz") { _, _ in readiness.response }
        let address = listener.host ?? "127.0.0.1"
        // A scraper's connection idle longer than the API's read timeout is closed, as the API's is.
        return Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .nanoseconds(settings.readTimeout.wholeNanoseconds))),
            configuration: ApplicationConfiguration(address: .hostname(address, port: listener.port), serverName: "ddp-bridge"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? listener.port
                logger.info("metrics served apart from the API", metadata: ["address": "http://\(address):\(port)/metrics"])
                await onRunning(port)
            },
            eventLoopGroupProvider: .shared(runtime.eventLoopGroup), logger: logger)
    }

    /// The HTTP contract this build serves (openapi.yaml, and the same as JSON), as built in.
    static func contract(_ text: String, _ type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// The verbs the router knows by name: each path that does not take one answers it 405.
    /// Any other verb is routed as `TRACE` (``RequestClassifier/routedVerb(for:)``), so it is
    /// answered alike.
    static let answeredVerbs = RequestClassifier.routerVerbs.compactMap { HTTPRequest.Method($0) }

    /// Registers every route (after the middlewares, which apply to routes added after them),
    /// and, on each path, a 405 with `Allow` for the verbs it does not take: the router's own
    /// path matching decides both.
    func register(on router: Router<BridgeRequestContext>) {
        var paths: [(path: String, methods: [HTTPRequest.Method])] = []
        for route in routes {
            let handler = route.handler
            router.on(RouterPath(route.path), method: route.method) { request, context in try await handler(request, context) }
            if let i = paths.firstIndex(where: { $0.path == route.path }) {
                paths[i].methods.append(route.method)
            } else {
                paths.append((route.path, [route.method]))
            }
        }
        for (path, methods) in paths {
            // HEAD is answered wherever GET is (the router makes those endpoints).
            let allowed = methods.contains(.get) && !methods.contains(.head) ? methods + [.head] : methods
            let listed = allowed.map(\.rawValue).joined(separator: ", ")
            for verb in Self.answeredVerbs where !allowed.contains(verb) {
                router.on(RouterPath(path), method: verb) { request, context -> Response in
                    let sent = (context.verbSent ?? request.method).rawValue
                    throw BridgeError(.methodNotAllowed, "\(sent) is not allowed here; use \(listed)", allow: allowed)
                }
            }
        }
    }

    /// A probe's answer, built without waiting, for the router and for ``FrontDoor``.
    @Sendable func probeAnswer(_ probe: RequestDecision.Probe) -> ProbeAnswer {
        switch probe {
        case .health: ProbeAnswer.health
        case .readiness: readiness
        }
    }

    private var readiness: ProbeAnswer {
        ProbeAnswer.readiness(probe.connection, failure: probe.failure, sessions: registry.count, shuttingDown: registry.isShuttingDown)
    }

    // MARK: - Sessions behind a request

    /// The session a request belongs to: its bridge token, or the session keyed by the
    /// Meteor login token it carries (created and resumed on first use). 401 otherwise, and
    /// 401 `login-lost` for a session whose login no longer holds upstream (it ends).
    func session(_ request: Request, _ context: BridgeRequestContext) async throws -> Session {
        guard let credential = RequestInput.credential(request) else {
            throw BridgeError(.noSession, Self.noSessionReason(authorization: request.headers[.authorization]))
        }
        let session: Session
        if SessionToken.isSessionToken(credential.token) {
            session = try await registry.session(token: credential.token)
        } else if credential.fromBearer {
            session = try await sessionForMeteorToken(credential.token, request, context)
        } else {
            throw BridgeError(.invalidSession, "Unknown session token")
        }
        // A session that lost its login never answers as an anonymous one.
        try await registry.checkLogin(session)
        session.touch()
        return session
    }

    /// Why a request carries no credential, in words that say what to change: most often an
    /// `Authorization` header without its `Bearer ` (never repeated: it may hold a token).
    static func noSessionReason(authorization: String?) -> String {
        let header = authorization.map { RequestInput.trimmed($0[...]) } ?? ""
        if header.isEmpty {
            return "This call needs a session: create one with POST /v1/sessions and send its token as Authorization: Bearer <token>"
        }
        if header.lowercased() == "bearer" {
            return "The Authorization header says Bearer but holds no token (is the variable holding it set?): "
                + "send Authorization: Bearer <token>, the token POST /v1/sessions answered"
        }
        if !header.contains(" ") {
            return "The Authorization header holds a token without its scheme: add 'Bearer ' before it (Authorization: Bearer <token>)"
        }
        return "The Authorization header is not a Bearer token: send the session's token as Authorization: Bearer <token> "
            + "(POST /v1/sessions makes a session)"
    }

    /// Plain REST clients holding a Meteor login token share one session keyed by its hash.
    private func sessionForMeteorToken(_ token: String, _ request: Request, _ context: BridgeRequestContext) async throws -> Session {
        let key = SessionToken.hash(token)
        if let existing = registry.session(meteorKey: key) { return existing }
        // Meteor login tokens are short URL-safe strings; anything else, or a token refused a
        // moment ago, is answered without troubling the upstream (or the login rate limit).
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/=")
        guard (8...512).contains(token.count), token.allSatisfy(allowed.contains), !registry.wasRefused(meteorKey: key) else {
            throw BridgeError(.invalidLoginToken, "The Meteor login token was refused")
        }
        let address = settings.clients.address(request, context)
        try registry.checkSessionRate(settings.clients.key(address))
        let (session, _) = try registry.create(clientAddress: address, meteorToken: token)
        do {
            try await session.waitUntilConnected(timeout: settings.connectTimeout)
            _ = try await registry.login(from: settings.clients.key(address)) {
                try await session.login(.resume(token: token), timeout: settings.requestTimeout)
            }
            return session
        } catch let error as DDPError where error.error == .number(403) {
            registry.rememberRefused(meteorKey: key)
            await registry.end(session, reason: "the Meteor login token was refused")
            throw BridgeError(.invalidLoginToken, "The Meteor login token was refused: \(error.reason ?? "403")")
        } catch {
            await registry.end(session, reason: "could not be set up")
            throw error
        }
    }
}
