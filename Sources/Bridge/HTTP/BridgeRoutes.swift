import DDP
import HTTPTypes
import Hummingbird

/// The REST surface. Each route family lives in its own extension file.
struct BridgeRoutes: Sendable {
    let registry: SessionRegistry
    var configuration: BridgeConfiguration { registry.configuration }

    typealias Handler = @Sendable (Request, BridgeRequestContext) async throws -> Response

    /// Registers every route, then answers 405 (with `Allow`) for the other verbs on known paths.
    func register(on router: Router<BridgeRequestContext>) {
        var table: [(path: String, methods: [HTTPRequest.Method])] = []
        func add(_ method: HTTPRequest.Method, _ path: String, _ handler: @escaping Handler) {
            router.on(RouterPath(path), method: method) { request, context in try await handler(request, context) }
            if let i = table.firstIndex(where: { $0.path == path }) { table[i].methods.append(method) } else { table.append((path, [method])) }
        }
        add(.get, "/healthz") { _, _ in HTTPSupport.json(["status": "ok"]) }
        add(.post, "/v1/sessions", createSession)
        add(.get, "/v1/session", getSession)
        add(.delete, "/v1/session", deleteSession)
        add(.post, "/v1/session/login", login)
        add(.post, "/v1/session/logout", logout)
        add(.post, "/v1/users", createUser)
        add(.post, "/v1/methods/**", callMethod)
        add(.post, "/v1/subscriptions", subscribe)
        add(.get, "/v1/subscriptions", listSubscriptions)
        add(.delete, "/v1/subscriptions", unsubscribeByName)
        add(.delete, "/v1/subscriptions/:id", unsubscribe)
        add(.get, "/v1/collections", listCollections)
        add(.get, "/v1/collections/:name", queryCollection)
        add(.post, "/v1/collections/:name", insertDocument)
        add(.get, "/v1/collections/:name/:id", getDocument)
        add(.patch, "/v1/collections/:name/:id", updateDocument)
        add(.delete, "/v1/collections/:name/:id", removeDocument)
        let verbs: [HTTPRequest.Method] = [.get, .post, .put, .patch, .delete]
        for (path, methods) in table {
            for verb in verbs where !methods.contains(verb) {
                let allowed = methods
                router.on(RouterPath(path), method: verb) { _, _ -> Response in
                    throw BridgeError(.methodNotAllowed, "method-not-allowed",
                                      "\(path) accepts \(allowed.map(\.rawValue).joined(separator: ", "))", allow: allowed)
                }
            }
        }
    }

    // MARK: - Sessions behind a request

    /// The session a request belongs to: its bridge token, or the session keyed by the
    /// Meteor login token it carries (created and resumed on first use). 401 otherwise.
    func session(_ request: Request, _ context: BridgeRequestContext) async throws -> Session {
        guard let credential = HTTPSupport.credential(request) else {
            throw BridgeError.unauthorized("no-session", "This call needs a session: create one with POST /v1/sessions and send its token as Authorization: Bearer")
        }
        let session: Session
        if SessionToken.isSessionToken(credential.token) {
            session = try registry.session(token: credential.token)
        } else if credential.fromBearer {
            session = try await sessionForMeteorToken(credential.token, request, context)
        } else {
            throw BridgeError.unauthorized("invalid-session", "Unknown session token")
        }
        session.touch()
        return session
    }

    /// Plain REST clients holding a Meteor login token share one session keyed by its hash.
    private func sessionForMeteorToken(_ token: String, _ request: Request, _ context: BridgeRequestContext) async throws -> Session {
        if let existing = registry.session(meteorKey: SessionToken.hash(token)) { return existing }
        let address = HTTPSupport.clientAddress(request, context, trustForwardedFor: configuration.trustForwardedFor)
        try registry.checkLoginRate(address)
        let (session, _) = try registry.create(clientAddress: address, meteorToken: token)
        do {
            try await session.waitUntilConnected(timeout: configuration.connectTimeout)
            _ = try await session.login(.resume(token: token), timeout: configuration.requestTimeout)
            return session
        } catch let error as DDPError where error.error == .number(403) {
            await registry.end(session, reason: "the Meteor login token was refused")
            throw BridgeError.unauthorized("invalid-login-token", "The Meteor login token was refused: \(error.reason ?? "403")")
        } catch {
            await registry.end(session, reason: "could not be set up")
            throw error
        }
    }
}
