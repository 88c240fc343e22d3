import CoreMetrics
import DDP
import DDPClient
import Hummingbird
import Timing
import Tracing

extension BridgeRoutes {
    /// `POST /v1/methods/{name}`: body a JSON array of EJSON params. Answers after `result` and
    /// `updated` (read-your-writes) unless `?wait=result`; `?timeout=ms`; `?atMostOnce=true`
    /// never re-sends the call after a reconnect.
    @Sendable func callMethod(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = context.parameters.getCatchAll().joined(separator: "/").percentDecoded ?? ""
        guard !name.isEmpty else { throw BridgeError.badRequest("a method name is needed: POST /v1/methods/{name}") }
        let params: [EJSON]
        switch try await RequestInput.body(request, limit: settings.maxBodySize) {
        case nil: params = []
        case .array(let list)?: params = list
        case let other?: throw BridgeError.badRequest("the body must be a JSON array of method parameters, not \(other.typeName)")
        }
        let completion: DDPClient.Completion
        switch RequestInput.query(request, "wait") {
        case nil, "updated": completion = .dataVisible
        case "result": completion = .result
        case let other?: throw BridgeError.badRequest("wait must be 'result' or 'updated', got '\(other)'")
        }
        let timeout = try RequestInput.duration(request, "timeout", default: settings.requestTimeout, max: settings.maxRequestTimeout)
        let atMostOnce = try RequestInput.flag(request, "atMostOnce") ?? false
        let session = try await session(request, context)
        let result = try await invoke(
            name, params, on: session, until: completion, timeout: timeout, given: RequestInput.query(request, "timeout") != nil,
            atMostOnce: atMostOnce, from: settings.clients.key(request, context))
        return Reply.json(["result": result ?? .null])
    }

    /// Calls a Meteor method as the session's user (REST and MCP): a login through it counts
    /// against the failed-login limit of `address`, and a call that logs in or out, or changes
    /// the connection's user, is kept as the session routes keep theirs.
    func invoke(
        _ name: String, _ params: [EJSON], on session: Session, until completion: DDPClient.Completion = .dataVisible, timeout: Duration,
        given: Bool = false, atMostOnce: Bool = false, from address: ClientKey
    ) async throws -> EJSON? {
        if ["login", "createUser"].contains(name) { try Self.refuseLoginIfKeyed(session) }
        try await session.waitUntilConnected(timeout: min(timeout, settings.connectTimeout))
        let started = runtime.clock.now
        defer { registry.metrics.methodDuration.recordNanoseconds((runtime.clock.now - started).wholeNanoseconds) }
        let call = {
            do {
                // A child span of the request's: the method call upstream, until its result (and `updated`).
                return try await withSpan("ddp.method", ofKind: .client) { span in
                    span.attributes["rpc.system"] = "ddp"
                    span.attributes["rpc.method"] = name
                    return try await session.client.call(
                        name, params: params, options: MethodOptions(atMostOnce: atMostOnce), until: completion, timeout: timeout)
                }
            } catch let error as DDPClientError where error.code == .timedOut {
                throw BridgeError.timedOut(
                    "the method '\(name)'", after: timeout, given: given, setting: "--request-timeout", most: settings.maxRequestTimeout)
            }
        }
        let before = session.loginToken
        let userBefore = session.userID
        // Logging in through the generic route counts against the same failed-login limit.
        let result =
            ["login", "createUser"].contains(name)
            ? try await registry.login(from: session.user?.key ?? address, call) : try await call()
        // The call logged in or out (the session follows its connection): kept as the session routes keep theirs.
        if let login = LoginResult(result) {
            session.claimLogin(token: login.token, byBridge: Session.logsInWithCredentials(method: name, params: params))
        }
        if session.loginToken != before {
            if session.loginToken == nil { registry.forgetMeteorKey(of: session) }
            await registry.save(session)
        }
        // Any other method that changed the connection's user (a custom login method): the token
        // no longer selects this session; it selects a new one of its own user next time.
        if session.userID != userBefore { registry.forgetMeteorKey(of: session) }
        return result
    }
}
