import DDP
import DDPServer
import HTTPTypes
import Testing
import Timing

@testable import Bridge

@Suite struct SessionRoutesTests {
    @Test func anonymousAndPasswordSessions() async throws {
        try await BridgeHarness.run { h in
            let (anonymous, reply) = try await h.session()
            #expect(anonymous.hasPrefix("ddpb_") && anonymous.count > 40)
            #expect(reply["userId"] == .null)
            let cookie = try #require(reply.headers[.setCookie])
            #expect(cookie.contains("ddp_bridge_session=\(anonymous)") && cookie.contains("HttpOnly"))

            let (_, alice) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            #expect(alice["userId"]?.stringValue?.count == 17)
            #expect(alice["loginToken"]?.stringValue?.count == 43)
            guard case .date? = alice["tokenExpires"] else {
                Issue.record("tokenExpires must be an EJSON date")
                return
            }
            let (_, byEmail) = try await h.session(#"{"email":"alice@example.com","password":"secret"}"#)
            #expect(byEmail["userId"] == alice["userId"])

            expectError(try await h.request(.post, "/v1/sessions", body: #"{"username":"alice","password":"nope"}"#), .forbidden, 403)
            expectError(try await h.request(.post, "/v1/sessions", body: #"{"username":"nobody","password":"x"}"#), .forbidden, 403)
            expectError(try await h.request(.post, "/v1/sessions", body: #"{"username":5,"password":"x"}"#), .badRequest, "bad-request")
            expectError(try await h.request(.post, "/v1/sessions", body: #"[1]"#), .badRequest, "bad-request")
            expectError(try await h.request(.post, "/v1/sessions", body: #"{"username":"#), .badRequest, "bad-request")
            #expect(h.registry.count == 3, "failed creations leave no session behind")
        }
    }

    @Test func tokensTravelAsBearerCookieOrQuery() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            #expect(try await h.request(.get, "/v1/session", token: token).status == .ok)
            #expect(try await h.request(.get, "/v1/session", headers: [.cookie: "other=1; ddp_bridge_session=\(token)"]).status == .ok)
            let byQuery = try await h.request(.get, "/v1/session?token=\(token)")
            #expect(byQuery.status == .ok)
            #expect(byQuery["connection"]?["state"] == "connected")
            expectError(try await h.request(.get, "/v1/session"), .unauthorized, "no-session")
            expectError(try await h.request(.get, "/v1/session", token: "ddpb_not-a-real-token"), .unauthorized, "invalid-session")
            #expect(try await h.request(.delete, "/v1/session", token: token).status == .noContent)
            expectError(try await h.request(.get, "/v1/session", token: token), .unauthorized, "session-expired")
        }
    }

    /// A token sent without its `Bearer ` (or a Bearer without a token, or another scheme) is
    /// answered 401 `no-session` with a reason saying what to send; the token is never repeated.
    @Test func anAuthorizationHeaderWithoutBearerSaysToAddIt() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            for (header, says) in [
                (token, "add 'Bearer ' before it"), ("  \(token) ", "add 'Bearer ' before it"),
                ("Bearer", "says Bearer but holds no token"), ("bearer   ", "says Bearer but holds no token"),
                ("Basic YWxpY2U6c2VjcmV0", "is not a Bearer token"), ("Token \(token)", "is not a Bearer token")
            ] {
                let reply = try await h.request(.get, "/v1/session", headers: [.authorization: header])
                expectError(reply, .unauthorized, "no-session")
                let reason = reply["reason"]?.stringValue ?? ""
                #expect(reason.contains(says) && reason.contains("Authorization: Bearer <token>"), "\(header): \(reason)")
                #expect(!reply.text.contains(token) && !reply.text.contains("YWxpY2U6c2VjcmV0"), "the header is not repeated: \(reply.text)")
            }
            // Without a header: the session is to be made first.
            let bare = try await h.request(.get, "/v1/collections/tasks")
            expectError(bare, .unauthorized, "no-session")
            #expect(bare["reason"]?.stringValue?.contains("POST /v1/sessions") == true)
            #expect(try await h.request(.get, "/v1/session", headers: [.authorization: "Bearer \(token)"]).status == .ok)
        }
    }

    @Test func loginLogoutResumeAndSignUp() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            expectError(try await h.request(.post, "/v1/session/login", token: token, body: "{}"), .badRequest, "bad-request")
            let login = try await h.request(.post, "/v1/session/login", token: token, body: #"{"username":"bob","password":"hunter2"}"#)
            #expect(login.status == .ok)
            let bob = try #require(login["userId"])
            #expect(try await h.request(.post, "/v1/methods/whoami", token: token)["result"] == bob)
            #expect(try await h.request(.get, "/v1/session", token: token)["userId"] == bob)
            #expect(try await h.request(.post, "/v1/session/logout", token: token)["userId"] == .null)
            #expect(try await h.request(.post, "/v1/methods/whoami", token: token)["result"] == .null)

            // A resume token from an earlier login opens a new session as the same user.
            let resumeToken = try #require(login["loginToken"]?.stringValue)
            let (_, resumed) = try await h.session(#"{"resume":"\#(resumeToken)"}"#)
            #expect(resumed["userId"] == bob)
            expectError(try await h.request(.post, "/v1/sessions", body: #"{"resume":"bogus"}"#), .forbidden, 403)

            // Sign-up without a session makes one for the new user.
            let signUp = try await h.request(
                .post, "/v1/users", body: #"{"username":"carol","email":"carol@example.com","password":"pw","profile":{"name":"Carol"}}"#)
            #expect(signUp.status == .created)
            let carolToken = try #require(signUp["token"]?.stringValue)
            #expect(try await h.request(.post, "/v1/methods/whoami", token: carolToken)["result"] == signUp["userId"])
            expectError(try await h.request(.post, "/v1/users", body: #"{"username":"carol","password":"pw"}"#), .forbidden, 403)
            expectError(try await h.request(.post, "/v1/users", body: #"{"password":"pw"}"#), .badRequest, "bad-request")
            // Sign-up inside a session logs that session in.
            let (other, _) = try await h.session()
            let dave = try await h.request(.post, "/v1/users", token: other, body: #"{"username":"dave","password":"pw"}"#)
            #expect(dave.status == .created && dave["token"] == nil)
            #expect(try await h.request(.post, "/v1/methods/whoami", token: other)["result"] == dave["userId"])
        }
    }

    @Test func aMeteorLoginTokenSelectsOneSharedSession() async throws {
        try await BridgeHarness.run { h in
            let (_, login) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            let meteorToken = try #require(login["loginToken"]?.stringValue)
            let first = try await h.request(.get, "/v1/session", token: meteorToken)
            #expect(first.status == .ok)
            #expect(first["userId"] == login["userId"])
            let second = try await h.request(.post, "/v1/methods/whoami", token: meteorToken)
            #expect(second["result"] == login["userId"])
            #expect(try await h.request(.get, "/v1/session", token: meteorToken)["id"] == first["id"], "the same session serves both")
            #expect(h.registry.count == 2)
            expectError(try await h.request(.get, "/v1/session", token: "not-a-valid-meteor-token"), .unauthorized, "invalid-login-token")
            #expect(h.registry.count == 2)
        }
    }

    /// A session keyed by alice's Meteor token stays alice's: logging it in as bob, by any route,
    /// is 409 `session-keyed-by-token`, and the token still acts as alice afterwards.
    @Test func aSessionKeyedByAMeteorTokenKeepsItsUser() async throws {
        try await BridgeHarness.run { h in
            let (_, alice) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            let token = try #require(alice["loginToken"]?.stringValue)
            #expect(try await h.request(.post, "/v1/methods/whoami", token: token)["result"] == alice["userId"])
            let bob = #"{"username":"bob","password":"hunter2"}"#
            let bobLogin =
                #"[{"user":{"username":"bob"},"password":{"digest":"f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7","algorithm":"sha-256"}}]"#
            expectError(try await h.request(.post, "/v1/session/login", token: token, body: bob), .conflict, "session-keyed-by-token")
            expectError(try await h.request(.post, "/v1/methods/login", token: token, body: bobLogin), .conflict, "session-keyed-by-token")
            expectError(
                try await h.request(.post, "/v1/methods/createUser", token: token, body: #"[{"username":"carol","password":"x"}]"#),
                .conflict, "session-keyed-by-token")
            expectError(
                try await h.request(.post, "/v1/users", token: token, body: #"{"username":"carol","password":"x"}"#), .conflict,
                "session-keyed-by-token")
            #expect(try await h.request(.post, "/v1/methods/whoami", token: token)["result"] == alice["userId"], "still alice")
            let session = try await h.request(.get, "/v1/session", token: token)
            #expect(session["userId"] == alice["userId"])
        }
    }

    @Test func idleSessionsExpireWithAClearReason() async throws {
        let time = BridgeClock.driven()
        try await BridgeHarness.run(configure: { $0.sessionIdleTimeout = .seconds(600) }, runtime: BridgeRuntime(clock: time)) { h in
            let (token, _) = try await h.session()
            // The driven clock flows with real time too: 10 s short of the timeout, so a loaded
            // machine's seconds between the session's last use and the sweep do not expire it.
            time.advance(by: .seconds(590))
            await h.registry.sweepOnce()
            #expect(h.registry.count == 1, "not idle for long enough yet")
            time.advance(by: .seconds(10))
            await h.registry.sweepOnce()
            let reply = try await h.request(.get, "/v1/session", token: token)
            expectError(reply, .unauthorized, "session-expired")
            #expect(reply["reason"]?.stringValue?.contains("idle") == true)
            #expect(h.registry.count == 0)
        }
    }

    @Test func sessionCreationIsRateLimitedPerAddress() async throws {
        // A window no loaded machine's three creations outlast.
        try await BridgeHarness.run(configure: { $0.sessionRateLimit = (3, .seconds(600)) }) { h in
            for _ in 0..<3 { _ = try await h.session() }
            let refused = try await h.request(.post, "/v1/sessions", body: "{}")
            expectError(refused, .tooManyRequests, "too-many-requests")
            #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 >= 1)
        }
    }

    @Test func sessionsPerAddressAndSubscriptionsPerSessionAreLimited() async throws {
        try await BridgeHarness.run(configure: {
            $0.maxSessionsPerAddress = 2
            $0.maxSubscriptionsPerSession = 2
        }) { h in
            let (token, _) = try await h.session()
            _ = try await h.session()
            expectError(try await h.request(.post, "/v1/sessions", body: "{}"), .tooManyRequests, "too-many-sessions")
            #expect(try await h.request(.post, "/v1/subscriptions", token: token, body: #"[{"name":"tasks"},{"name":"typed"}]"#).status == .created)
            #expect(
                try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#).status == .created, "sharing costs nothing")
            expectError(
                try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"myTasks"}"#), .tooManyRequests,
                "too-many-subscriptions")
            #expect(try await h.request(.delete, "/v1/session", token: token).status == .noContent)
            #expect(try await h.request(.post, "/v1/sessions", body: "{}").status == .created, "closing one frees its place")
        }
    }

    @Test func theBridgeHoldsAtMostItsSessionLimit() async throws {
        try await BridgeHarness.run(configure: { $0.maxSessions = 2 }) { h in
            let (first, _) = try await h.session()
            _ = try await h.session()
            let full = try await h.request(.post, "/v1/sessions", body: "{}")
            expectError(full, .serviceUnavailable, "too-many-sessions")
            #expect(Int(full.headers[.retryAfter] ?? "") ?? 0 >= 1)
            #expect(try await h.request(.delete, "/v1/session", token: first).status == .noContent)
            #expect(try await h.request(.post, "/v1/sessions", body: "{}").status == .created)
        }
    }

    @Test func corsAnswersListedOriginsOnly() async throws {
        try await BridgeHarness.run(configure: { $0.corsOrigins = ["http://app.example"] }) { h in
            let preflight = try await h.request(
                .options, "/v1/sessions",
                headers: [
                    .origin: "http://app.example", .accessControlRequestMethod: "POST", .accessControlRequestHeaders: "content-type"
                ])
            #expect(preflight.status.code < 300)
            #expect(preflight.headers[.accessControlAllowOrigin] == "http://app.example")
            #expect(preflight.headers[.accessControlAllowCredentials] == "true")
            let created = try await h.request(.post, "/v1/sessions", body: "{}", headers: [.origin: "http://app.example"])
            #expect(created.status == .created && created.headers[.accessControlAllowOrigin] == "http://app.example")
            let other = try await h.request(.post, "/v1/sessions", body: "{}", headers: [.origin: "http://evil.example"])
            #expect(other.headers[.accessControlAllowOrigin] == nil)
        }
    }

    @Test func theUpstreamSeesTheUsersAddress() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            #expect(try await h.request(.post, "/v1/methods/clientAddress", token: token)["result"] == "127.0.0.1")
        }
    }
}
