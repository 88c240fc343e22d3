import DDP
import DDPServer
import NIOCore
import NIOPosix
import Testing

@testable import DDPClient

/// A name with several addresses, as `localhost` is on most machines (`::1` and `127.0.0.1`),
/// where the app listens on only one of them: NIO tries each (Happy Eyeballs), and the one that
/// connects is the connection. The address that refused used to end the whole attempt, as if
/// the upstream had closed before answering the upgrade, so the bridge never connected.
@Suite struct SeveralAddressesTests {
    /// Answers every name with the given addresses, IPv6 first.
    struct FixedResolver: Resolver, Sendable {
        let v6: [SocketAddress]
        let v4: [SocketAddress]
        func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
            MultiThreadedEventLoopGroup.singleton.any().makeSucceededFuture(v4)
        }
        func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
            MultiThreadedEventLoopGroup.singleton.any().makeSucceededFuture(v6)
        }
        func cancelQueries() {}
    }

    @Test func aNameWhoseFirstAddressRefusesConnectsThroughTheNext() async throws {
        let server = try await startDemoServer()
        let port = try #require(URLPort.of(await server.url))
        // Nothing listens on ::1 at the server's port (it listens on 127.0.0.1 only).
        let resolver = FixedResolver(
            v6: [try SocketAddress(ipAddress: "::1", port: port)], v4: [try SocketAddress(ipAddress: "127.0.0.1", port: port)])
        do {
            // `withClient` waits (10 s at most) for the client to connect.
            let connected = try await withClient("ws://app.test:\(port)/websocket", configure: { $0.resolver = resolver }) { client, _ in
                await client.isConnected
            }
            #expect(connected)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}

/// The port of a `ws://host:port/…` URL.
enum URLPort {
    static func of(_ url: String) -> Int? {
        guard let afterHost = url.split(separator: "://").last?.split(separator: "/").first,
            let port = afterHost.split(separator: ":").last
        else { return nil }
        return Int(port)
    }
}
