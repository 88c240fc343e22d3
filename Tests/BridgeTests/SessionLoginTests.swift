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
/// too) is the session's login.
@Suite struct SessionLoginTests {
    /// `login` through the method route, with the password as Meteor's client sends it (a digest).
    static var methodLogin: String {
        #"[{"user":{"username":"alice"},"password":{"digest":"\#(SHA256Digest.hex("secret"))","algorithm":"sha-256"}}]"#
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
}
