import BridgeStore
import DDP
import DDPServer
import FaultKit
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOHTTP1
import Testing

@testable import Bridge

/// Who a session is, through real HTTP: a login made by any route (`POST /v1/methods/login`
/// too) is the session's login, and a login the upstream no longer takes ends the session
/// rather than letting it go on anonymous.
@Suite struct SessionLoginTests {
    static let alice = #"{"username":"alice","password":"secret"}"#

    /// `login` through the method route, with the password as Meteor's client sends it (a digest).
    static var methodLogin: String {
        #"[{"user":{"username":"alice"},"password":{"digest":"\#(SHA256Digest.hex("secret"))","algorithm":"sha-256"}}]"#
    }

    /// Restarts the upstream on its port (every connection drops, as when a Meteor app restarts),
    /// having first made it forget `userId`'s resume tokens when one is given.
    static func restartUpstream(_ upstream: LocalDDPServer, revoking userId: String? = nil) async throws {
        let port = try #require(await upstream.port)
        await upstream.stop()
        if let userId { try await upstream.core.revokeLoginTokens(userId: userId) }
        try await upstream.start(port: port)
    }

    static func isUserEvent(_ event: SSEEvent, _ userId: EJSON) -> Bool { event.event == "user" && event.json["userId"] == userId }

    // MARK: - A login through the method route is the session's login

    /// An anonymous session logs in with `POST /v1/methods/login` (the password as a digest):
    /// `GET /v1/session` names the user, the open stream gets the `user` event, and the memory
    /// budget counts the session as logged in (with no anonymous share, an anonymous session may
    /// subscribe to nothing). `logout` through the same route makes it anonymous again.
    @Test func aLoginThroughTheMethodRouteIsTheSessionsLogin() async throws {
        try await BridgeHarness.run(configure: { $0.memoryShareAnonymous = 0 }) { h in
            let (token, _) = try await h.session()
            expectError(
                try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#), .tooManyRequests,
                "memory-share-exhausted")
            let port = try #require(h.client.port)
            try await withEventStream(port: port, "/v1/events", token: token) { stream in
                try await stream.waitUntilOpen()
                let login = try await h.request(.post, "/v1/methods/login", token: token, body: Self.methodLogin)
                #expect(login.status == .ok, "\(login.text)")
                let userId = try #require(login["result"]?["id"]?.stringValue.map(EJSON.string))
                #expect(login["result"]?["token"]?.stringValue != nil)
                #expect(try await h.request(.get, "/v1/session", token: token)["userId"] == userId)
                try await stream.wait("the user event") { $0.contains { Self.isUserEvent($0, userId) } }
                #expect(
                    try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#).status == .created,
                    "the budget counts the session as logged in")
                #expect(try await h.request(.post, "/v1/methods/whoami", token: token)["result"] == userId)

                let logout = try await h.request(.post, "/v1/methods/logout", token: token, body: "[]")
                #expect(logout.status == .ok, "\(logout.text)")
                #expect(try await h.request(.get, "/v1/session", token: token)["userId"] == .null)
                try await stream.wait("the user event of the logout") { $0.contains { Self.isUserEvent($0, .null) } }
            }
            // `createUser` through the method route logs in as well.
            let (other, _) = try await h.session()
            let signUp = try await h.request(.post, "/v1/methods/createUser", token: other, body: #"[{"username":"erin","password":"pw"}]"#)
            #expect(signUp.status == .ok, "\(signUp.text)")
            #expect(try await h.request(.get, "/v1/session", token: other)["userId"] == signUp["result"]?["id"])
        }
    }

    /// With a session store and a key, a login made through the method route is saved as the
    /// session's login: after a restart of the bridge the session comes back as that user.
    @Test func aLoginThroughTheMethodRouteSurvivesARestart() async throws {
        let folder = try SessionStoreTests.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        try await SessionStoreTests.withUpstream { _, url in
            let first = LockedState<(token: String, userId: EJSON)>(("", .null))
            try await BridgeHarness.run(upstreamURL: url, configure: SessionStoreTests.storing(in: folder, key: key)) { h in
                let (token, _) = try await h.session()
                let login = try await h.request(.post, "/v1/methods/login", token: token, body: Self.methodLogin)
                #expect(login.status == .ok, "\(login.text)")
                first.withLock { $0 = (token, login["result"]?["id"] ?? .null) }
            }
            let (token, userId) = first.withLock { $0 }
            #expect(userId != .null)
            try await BridgeHarness.run(upstreamURL: url, configure: SessionStoreTests.storing(in: folder, key: key)) { h in
                let session = try await h.request(.get, "/v1/session", token: token)
                #expect(session.status == .ok, "\(session.text)")
                #expect(session["userId"] == userId, "\(session.text)")
                #expect(try await h.request(.post, "/v1/methods/whoami", token: token)["result"] == userId, "logged in upstream too")
            }
        }
    }

    // MARK: - A lost login ends the session

    enum LoginRoute: String, CaseIterable, Sendable {
        /// `POST /v1/sessions` with a password.
        case sessionCreation
        /// An anonymous session that logs in later, through `POST /v1/methods/login`.
        case methodRoute
    }

    /// A session with a login (made when it was created, or later through the method route); the
    /// Meteor app restarts and no longer takes her resume token. The session does not go on
    /// anonymous: a call made during the outage and every later call answer 401 `login-lost`
    /// with the upstream's reason, the open stream gets a last `error` event saying so and ends,
    /// and the session is gone, its stored copy ended (a later life of the bridge does not
    /// bring it back).
    @Test(arguments: LoginRoute.allCases)
    func aLostLoginEndsTheSession(_ route: LoginRoute) async throws {
        let folder = try SessionStoreTests.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let key = SessionKey.random()
        try await SessionStoreTests.withUpstream { upstream, url in
            let lostToken = LockedState("")
            try await BridgeHarness.run(upstreamURL: url, configure: SessionStoreTests.storing(in: folder, key: key)) { h in
                let token: String
                let userId: String
                switch route {
                case .sessionCreation:
                    let (created, login) = try await h.session(Self.alice)
                    (token, userId) = (created, try #require(login["userId"]?.stringValue))
                case .methodRoute:
                    let (created, _) = try await h.session()
                    let login = try await h.request(.post, "/v1/methods/login", token: created, body: Self.methodLogin)
                    (token, userId) = (created, try #require(login["result"]?["id"]?.stringValue))
                }
                lostToken.withLock { $0 = token }
                #expect(try await h.request(.post, "/v1/methods/whoami", token: token)["result"] == .string(userId))
                let port = try #require(h.client.port)
                try await withEventStream(port: port, "/v1/events", token: token) { stream in
                    try await stream.waitUntilOpen()
                    let bridgePort = port
                    // A call made while the upstream is away waits for it, and must not then run anonymous.
                    let upstreamPort = try #require(await upstream.port)
                    await upstream.stop()
                    try await upstream.core.revokeLoginTokens(userId: userId)
                    async let during = requestOnOwnConnection(port: bridgePort, .POST, "/v1/methods/whoami", token: token, body: "[]")
                    try await upstream.start(port: upstreamPort)

                    try await stream.wait("the last event: login-lost") { $0.contains { $0.event == "error" && $0.json["error"] == "login-lost" } }
                    try await stream.waitUntilFinished()
                    let last = await stream.events.last
                    #expect(last?.event == "error" && last?.json["error"] == "login-lost", "the stream ends with it")
                    #expect(last?.json["reason"]?.stringValue?.contains("logged out by the server") == true, "\(String(describing: last))")

                    let (status, body) = try await during
                    #expect(status == 401 && body.contains("login-lost"), "the call made during the outage: \(status) \(body)")
                }
                let refused = try await h.request(.post, "/v1/methods/whoami", token: token, body: "[]")
                expectError(refused, .unauthorized, "login-lost")
                #expect(refused["details"]?["upstream"]?["reason"]?.stringValue?.contains("logged out by the server") == true, "\(refused.text)")
                // A poll: the registry ends the session after this answer, and its connection is
                // closed already (since the refusal), so nothing of the session is left to report it.
                try await eventually("the session is gone") { h.registry.count == 0 }
                expectError(try await h.request(.get, "/v1/session", token: token), .unauthorized, "login-lost")
                expectError(try await h.request(.get, "/v1/collections", token: token), .unauthorized, "login-lost")
                guard case .found(let stored)? = await h.registry.persistence?.load(tokenHash: SessionToken.hash(token)) else {
                    Issue.record("the stored session is still there, ended")
                    return
                }
                #expect(stored.ended != nil && stored.sealedLogin == nil, "its stored copy is ended and holds no login")
            }
            // A later life of the bridge does not bring the session back, anonymous or otherwise.
            try await BridgeHarness.run(upstreamURL: url, configure: SessionStoreTests.storing(in: folder, key: key)) { h in
                let later = try await h.request(.get, "/v1/session", token: lostToken.withLock { $0 })
                expectError(later, .unauthorized, "session-expired")
                #expect(later["reason"]?.stringValue?.contains("login was lost") == true, "\(later.text)")
            }
        }
    }

    /// A session that logged out on purpose has no login to lose: it goes on (anonymous) through
    /// an upstream restart.
    @Test func aSessionThatLoggedOutGoesOnThroughARestart() async throws {
        try await BridgeHarness.run { h in
            let (token, login) = try await h.session(Self.alice)
            let userId = try #require(login["userId"]?.stringValue)
            let logout = try await h.request(.post, "/v1/methods/logout", token: token, body: "[]")
            #expect(logout.status == .ok, "\(logout.text)")
            let before = try await h.request(.get, "/v1/session", token: token)["connection"]?["ddpSession"]
            try await Self.restartUpstream(h.upstream, revoking: userId)
            try await h.waitUntilLive("reconnected", session: token, after: before?.stringValue)
            let connection = try await h.request(.get, "/v1/session", token: token)["connection"]
            #expect(connection?["state"] == "connected" && connection?["ddpSession"] != before, "\(String(describing: connection))")
            let whoami = try await h.request(.post, "/v1/methods/whoami", token: token, body: "[]")
            #expect(whoami.status == .ok && whoami["result"] == .null, "\(whoami.text)")
            #expect(h.registry.count == 1)
        }
    }
}
