import DDP
import DDPClient
import Foundation
import HTTPTypes
import Hummingbird

extension BridgeRoutes {
    /// `POST /v1/sessions`: anonymous, or logged in with a password, a resume token or a raw login payload.
    @Sendable func createSession(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let body = try await RequestInput.objectBody(request, limit: settings.maxBodySize)
        let loginRequest = try body.flatMap(Self.loginRequest)
        let address = settings.clients.address(request, context)
        try registry.checkSessionRate(settings.clients.key(address))
        let (session, token) = try registry.create(clientAddress: address)
        do {
            try await session.waitUntilConnected(timeout: settings.connectTimeout)
            var out: EJSONObject = ["token": .string(token), "userId": nil, "loginToken": nil, "tokenExpires": nil]
            if let loginRequest {
                let result = try await registry.login(from: settings.clients.key(address)) {
                    try await session.login(loginRequest, timeout: settings.requestTimeout)
                }
                out.merge(Self.loginFields(result))
            }
            await registry.save(session)
            return Reply.json(.object(out), status: .created, headers: [.setCookie: SessionCookie.setting(token)])
        } catch {
            await registry.end(session, reason: "its creation failed")
            throw error
        }
    }

    /// `GET /v1/session`: connection state, user, subscriptions.
    @Sendable func getSession(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let session = try await session(request, context)
        return Reply.json([
            "id": .string(session.id),
            "connection": await session.connectionReport(),
            "userId": session.userID.map(EJSON.string) ?? .null,
            "subscriptions": .array(session.subscriptions.map(\.ejson)),
            "createdAt": .string(session.createdAt.formatted(.iso8601)),
            "idleTimeout": .int(Int(truncatingIfNeeded: settings.sessionIdleTimeout.wholeSeconds))
        ])
    }

    /// `DELETE /v1/session`: closes the upstream connection (logging out a login the bridge made).
    @Sendable func deleteSession(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let session = try await session(request, context)
        await registry.end(session, reason: "it was closed by its client")
        return Response(status: .noContent, headers: [.setCookie: SessionCookie.cleared])
    }

    /// `POST /v1/session/login`.
    @Sendable func login(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        guard let body = try await RequestInput.objectBody(request, limit: settings.maxBodySize), let loginRequest = try Self.loginRequest(body)
        else {
            throw BridgeError.badRequest("the body must hold {\"username\" or \"email\", \"password\"}, {\"resume\": token} or {\"login\": payload}")
        }
        let session = try await session(request, context)
        try Self.refuseLoginIfKeyed(session)
        let result = try await registry.login(
            from: session.user?.key ?? settings.clients.key(request, context)
        ) {
            try await session.login(loginRequest, timeout: settings.requestTimeout)
        }
        await registry.save(session)
        return Reply.json(.object(Self.loginFields(result)))
    }

    /// `POST /v1/session/logout`.
    @Sendable func logout(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let session = try await session(request, context)
        try await session.logout(timeout: settings.requestTimeout)
        registry.forgetMeteorKey(of: session)
        await registry.save(session)
        return Reply.json(["userId": nil])
    }

    /// `POST /v1/users`: Meteor's `createUser`; without a session, one is created for the new user.
    @Sendable func createUser(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        guard let body = try await RequestInput.objectBody(request, limit: settings.maxBodySize) else {
            throw BridgeError.badRequest("the body must hold {\"username\" and/or \"email\", \"password\", \"profile\"?}")
        }
        let username = try Self.optionalString(body, "username")
        let email = try Self.optionalString(body, "email")
        guard username != nil || email != nil else { throw BridgeError.badRequest("a username or an email is needed") }
        guard case .string(let password)? = body["password"], !password.isEmpty else {
            throw BridgeError.badRequest("password must be a non-empty string")
        }
        if let profile = body["profile"], profile.objectValue == nil { throw BridgeError.badRequest("profile must be an object") }
        let existing = RequestInput.credential(request) == nil ? nil : try await session(request, context)
        if let existing { try Self.refuseLoginIfKeyed(existing) }
        let address = existing?.user?.address ?? settings.clients.address(request, context)
        if existing == nil { try registry.checkSessionRate(settings.clients.key(address)) }
        var created: (session: Session, token: String)?
        if existing == nil { created = try registry.create(clientAddress: address) }
        let session = existing ?? created!.session
        do {
            try await session.waitUntilConnected(timeout: settings.connectTimeout)
            let result = try await registry.login(from: settings.clients.key(address)) {
                try await session.createUser(
                    username: username, email: email, password: password, profile: body["profile"], timeout: settings.requestTimeout)
            }
            await registry.save(session)
            var out = Self.loginFields(result)
            var headers: HTTPFields = [:]
            if let created {
                out["token"] = .string(created.token)
                headers[.setCookie] = SessionCookie.setting(created.token)
            }
            return Reply.json(.object(out), status: .created, headers: headers)
        } catch {
            if let created { await registry.end(created.session, reason: "its creation failed") }
            throw error
        }
    }

    // MARK: - Helpers

    /// A session keyed by a Meteor login token (one sent as `Authorization: Bearer`) is that
    /// token's user for as long as it lives: logging it in as another user would make the token
    /// act as that user. 409 `session-keyed-by-token`; a logout is allowed (the key is dropped:
    /// Meteor ends the token).
    static func refuseLoginIfKeyed(_ session: Session) throws(BridgeError) {
        guard session.user?.meteorKey != nil else { return }
        throw BridgeError(
            .sessionKeyedByToken,
            "This session is keyed by the Meteor login token it was sent with and stays that token's user: to log in as "
                + "someone else, create a session of your own (POST /v1/sessions with the credentials) and use its token")
    }

    static func loginFields(_ result: LoginResult) -> EJSONObject {
        ["userId": .string(result.userId), "loginToken": .string(result.token), "tokenExpires": result.tokenExpires.map(EJSON.date) ?? .null]
    }

    /// `{"username"|"email", "password"}`, `{"resume": token}`, `{"login": payload}`; `nil` for an empty object.
    static func loginRequest(_ body: EJSONObject) throws(BridgeError) -> LoginRequest? {
        if body.isEmpty { return nil }
        if let raw = body["login"] {
            guard case .object = raw else { throw .badRequest("login must be an object (the payload for Meteor's login method)") }
            return .raw(raw)
        }
        if let resume = body["resume"] {
            guard case .string(let token) = resume, !token.isEmpty else { throw .badRequest("resume must be a non-empty string") }
            return .resume(token: token)
        }
        guard case .string(let password)? = body["password"] else {
            throw .badRequest("password must be a string (with username or email)")
        }
        if let username = try optionalString(body, "username") { return .password(user: .username(username), password: password) }
        if let email = try optionalString(body, "email") { return .password(user: .email(email), password: password) }
        throw .badRequest("a password login needs a username or an email")
    }

    static func optionalString(_ body: EJSONObject, _ key: String) throws(BridgeError) -> String? {
        switch body[key] {
        case nil: return nil
        case .string(let s)? where !s.isEmpty: return s
        default: throw .badRequest("\(key) must be a non-empty string")
        }
    }

}

extension EJSONObject {
    mutating func merge(_ other: EJSONObject) {
        for field in other { self[field.key] = field.value }
    }
}
