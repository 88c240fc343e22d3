import Foundation
import HummingbirdCore
import HummingbirdTesting
import Logging
import NIOCore
import NIOEmbedded
import ServiceLifecycle
import Testing

@testable import Bridge

/// The bridge's connections, set up from public parts (``BridgeChildChannel``) with the front
/// door deciding each request (``FrontDoor``): requests are answered in order with bodies read or
/// skipped, a request without a body gets an empty one, `Connection: close` ends the connection,
/// and Hummingbird's graceful shutdown closes a kept-alive connection between requests (which it
/// knows because every answer passes its connection-state handler).
@Suite struct RequestLoopTests {
    /// An admitted connection gets the HTTP handlers, Hummingbird's connection-state handler and
    /// the front door after it; a refused one only its refusal.
    @Test func anAdmittedConnectionGetsTheFrontDoorAfterTheConnectionStateHandler() throws {
        var configuration = BridgeConfiguration(upstream: "ws://127.0.0.1:1/websocket")
        configuration.maxConnectionsPerAddress = 1
        let admission = ConnectionAdmission(limits: configuration.admissionLimits, budget: MemoryBudget(configuration.memoryBudgetSettings)) { 0 }
        let child = BridgeChildChannel(
            admission: admission, refused: { _ in }, idleTimeout: .seconds(30), rooms: FrontDoor.Rooms.inert)
        let admitted = EmbeddedChannel()
        try admitted.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        _ = try child.setup(channel: admitted, logger: Logger(label: "test")).wait()
        let operations = admitted.pipeline.syncOperations
        // The pipeline's description lists its handlers in order.
        let order = admitted.pipeline.debugDescription
        let state = try #require(order.range(of: "HTTPConnectionStateHandler"))
        let door = try #require(order.range(of: "FrontDoor"))
        #expect(state.lowerBound < door.lowerBound, "the front door follows the connection-state handler: \(order)")
        #expect((try? operations.handler(type: HTTPVersionTap.self)) != nil)
        #expect((try? operations.handler(type: RefusedConnection.self)) == nil)

        let refused = EmbeddedChannel()
        try refused.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        _ = try child.setup(channel: refused, logger: Logger(label: "test")).wait()
        #expect((try? refused.pipeline.syncOperations.handler(type: RefusedConnection.self)) != nil)
        #expect((try? refused.pipeline.syncOperations.handler(type: FrontDoor.self)) == nil)
        _ = try? refused.finish(acceptAlreadyClosed: true)
        _ = try? admitted.finish(acceptAlreadyClosed: true)
    }

    /// Six requests in one write: each answered in turn, a body the route does not read skipped,
    /// a request without `Content-Length` read as an empty body, and nothing after the request
    /// that asked to close.
    @Test func pipelinedRequestsAreAnsweredInOrderUntilOneAsksToClose() async throws {
        try await BridgeHarness.run(configure: { $0.readTimeout = .seconds(60) }) { h in
            let port = try #require(h.client.port)
            let requests = [
                // No Content-Length, no Transfer-Encoding: no body; the route reads an empty one.
                "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                // A body the route does not read: skipped, and the next request read after it.
                "GET /v1/public/publications HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello",
                "GET /v1/no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                // A body the route reads (and refuses: not an object).
                "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n[1,2,3]",
                "GET /v1/public/publications HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                // Behind the close: never read.
                "GET /v1/no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            ]
            let (text, closed) = try await RawConnection.exchange(port: port, requests.joined())
            #expect(closed, "the connection stayed open after the request that asked to close: \(text)")
            #expect(Self.statuses(text) == [201, 200, 404, 400, 200], "\(text)")
            #expect(h.registry.count == 1, "the session made from a request without a body")
        }
    }

    /// Hummingbird's graceful shutdown closes a kept-alive connection between its requests at
    /// once: its connection-state handler saw the loop's answers go out.
    @Test func aShutdownClosesAKeptAliveConnectionBetweenRequests() async throws {
        try await ShutdownRig.run(grace: .seconds(10)) { rig in
            let connection = try await RawConnection.open(port: rig.port)
            try await connection.send("GET /v1/public/publications HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await connection.waitUntilReceived("HTTP/1.1 200", count: 1, within: .seconds(10)) == 1)
            #expect(await !connection.isClosed)
            await rig.group.triggerGracefulShutdown()
            #expect(try await connection.waitUntilClosed(within: .seconds(10)), "a kept-alive connection held the shutdown")
            try await rig.waitUntilStopped()
        }
    }

    /// The status codes of the answers in `text`, in order.
    static func statuses(_ text: String) -> [Int] {
        text.components(separatedBy: "HTTP/1.1 ").dropFirst().compactMap { Int($0.prefix(3)) }
    }
}
