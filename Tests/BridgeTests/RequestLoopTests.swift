import Foundation
import HummingbirdCore
import HummingbirdTesting
import Logging
import NIOCore
import NIOEmbedded
import ServiceLifecycle
import Testing

@testable import Bridge

/// The request loop the bridge copies from Hummingbird (``ProbingHTTP1Channel``, after
/// HummingbirdCore's `handleHTTP`), held to what the copy relies on: Hummingbird's
/// `HTTP1Channel.setup` installs the `HTTPConnectionStateHandler` the bridge's handlers are
/// placed after (looked up by type), requests are answered in order with bodies read or skipped,
/// a request without a body gets an empty one, `Connection: close` ends the loop, and
/// Hummingbird's graceful shutdown closes a kept-alive connection between requests (which it
/// knows because the loop's answers pass its state handler). A new Hummingbird that changes any
/// of these fails here.
@Suite struct RequestLoopTests {
    /// The bridge's setup on Hummingbird's: it finds Hummingbird's connection-state handler by
    /// its type (setup fails without it) and adds its own after it.
    @Test func hummingbirdsSetupInstallsTheConnectionStateHandlerTheBridgesHandlersFollow() throws {
        let channel = EmbeddedChannel()
        let base = HTTP1Channel(responder: { _, _, _ in }, configuration: .init(idleTimeout: .seconds(30)))
        _ = try base.setup(channel: channel, logger: Logger(label: "test")).wait().unscopedParts.1.finish()
        #expect((try? channel.pipeline.syncOperations.handler(type: HTTPConnectionStateHandler.self)) != nil)
        _ = try? channel.finish()

        let bridged = EmbeddedChannel()
        let configuration = BridgeConfiguration(upstream: "ws://127.0.0.1:1/websocket")
        let admission = ConnectionAdmission(configuration: configuration, budget: MemoryBudget(configuration: configuration)) { 0 }
        let probing = ProbingHTTP1Channel(base: base, admission: admission, refused: { _ in }, unparsed: { _ in }) {
            ProbeFastPath(answer: { _ in nil }, answered: { _, _ in })
        }
        let value = try probing.setup(channel: bridged, logger: Logger(label: "test")).wait()
        let operations = bridged.pipeline.syncOperations
        #expect((try? operations.handler(type: HTTPConnectionStateHandler.self)) != nil)
        #expect((try? operations.handler(type: ProbeFastPath.self)) != nil)
        #expect((try? operations.handler(type: StreamAnchor.self)) != nil)
        #expect(value.takeOver != nil, "an admitted connection can be taken over by a stream")
        value.parts.unscopedParts.1.finish()
        _ = try? bridged.finish()
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
