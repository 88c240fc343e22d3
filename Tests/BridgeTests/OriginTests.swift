import Foundation
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import Testing

@testable import Bridge

/// Same-origin is the bridge's public origins (`--public-origin`, by default the listening
/// address's), never a header the client chooses.
@Suite struct OriginTests {
    static let credentials = #"{"username":"alice","password":"secret"}"#

    /// DNS rebinding: a page of evil.example, its name resolved to the bridge's address, sends
    /// `Host: evil.example` and `Origin: http://evil.example`. It got 201 and a session cookie
    /// (the visitor's browser logged in as the attacker chose); behind a trusted proxy, its
    /// `X-Forwarded-Host` did the same.
    @Test func aRebindingPageIsRefusedAndTheBridgesOwnOriginWorks() async throws {
        try await BridgeHarness.run(configure: { $0.trustedProxies = [IPRange("127.0.0.1")!] }) { h in
            let port = try #require(h.client.port)
            for headers in [
                [("Host", "evil.example"), ("Origin", "http://evil.example")],
                [("Host", "evil.example:\(port)"), ("Origin", "http://evil.example:\(port)")],
                [("X-Forwarded-Host", "evil.example"), ("Origin", "http://evil.example")]
            ] {
                let reply = try await rawRequest(
                    port: port, .POST, "/v1/sessions", headers: headers + [("Content-Type", "application/json")], body: Self.credentials)
                #expect(reply.status == 403 && reply.body.contains("origin-not-allowed"), "\(headers): \(reply.body)")
                #expect(reply.headers["Set-Cookie"].isEmpty)
            }
            #expect(h.registry.count == 0)
            // The listening address's origins are the bridge's own, whatever the Host says.
            for origin in ["http://127.0.0.1:\(port)", "http://localhost:\(port)"] {
                let reply = try await rawRequest(
                    port: port, .POST, "/v1/sessions",
                    headers: [("Host", "evil.example"), ("Origin", origin), ("Content-Type", "application/json")], body: Self.credentials)
                #expect(reply.status == 201 && reply.headers["Set-Cookie"].count == 1, "\(origin): \(reply.body)")
            }
        }
    }

    /// A configured public origin (the address the console is opened at behind a proxy) works,
    /// and replaces the listening address's.
    @Test func aConfiguredPublicOriginIsTheBridgesOwn() async throws {
        try await BridgeHarness.run(configure: { $0.publicOrigins = ["https://bridge.example.com"] }) { h in
            let port = try #require(h.client.port)
            let own = try await rawRequest(
                port: port, .POST, "/v1/sessions",
                headers: [("Origin", "https://bridge.example.com"), ("Content-Type", "application/json")], body: Self.credentials)
            #expect(own.status == 201 && own.headers["Set-Cookie"].count == 1, "\(own.body)")
            let listening = try await rawRequest(
                port: port, .POST, "/v1/sessions",
                headers: [("Origin", "http://127.0.0.1:\(port)"), ("Content-Type", "application/json")], body: Self.credentials)
            #expect(listening.status == 403 && listening.body.contains("origin-not-allowed"), "\(listening.body)")
        }
    }

    @Test func theListeningAddressNamesTheDefaultOrigins() throws {
        func origins(_ ip: String, _ port: Int) throws -> [String] {
            OwnOrigins.origins(listeningOn: try SocketAddress(ipAddress: ip, port: port))
        }
        #expect(try origins("127.0.0.1", 8080) == ["http://127.0.0.1:8080", "http://localhost:8080"])
        #expect(try origins("::1", 8080) == ["http://[::1]:8080", "http://localhost:8080"])
        #expect(try origins("192.0.2.5", 80) == ["http://192.0.2.5"])
        #expect(try origins("0.0.0.0", 8080).isEmpty, "a wildcard address names no origin")
        #expect(try origins("::", 8080).isEmpty)
    }

    @Test func publicOriginsAreReadAsABrowserWritesThem() throws {
        let upstream = ["upstream": "ws://meteor:3000/websocket"]
        #expect(try Settings(flags: upstream, environment: [:]).configuration.publicOrigins == nil)
        let given = try Settings(
            flags: upstream.merging(["public-origin": "https://Bridge.Example.com:443/, http://localhost:8080"]) { $1 }, environment: [:])
        #expect(given.configuration.publicOrigins == ["https://bridge.example.com", "http://localhost:8080"])
        #expect(try Settings(flags: upstream.merging(["public-origin": "none"]) { $1 }, environment: [:]).configuration.publicOrigins == [])
        for bad in ["bridge.example.com", "ftp://bridge.example.com", "https://bridge.example.com/console"] {
            #expect(throws: Settings.Invalid.self, "\(bad)") {
                try Settings(flags: upstream.merging(["public-origin": bad]) { $1 }, environment: [:])
            }
        }
    }
}
