import Bridge
import DDP
import DDPServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

/// The read timeout and graceful shutdown, through real sockets.
@Suite struct OperationsTests {
    @Test func aClientSlowToSendItsRequestIsCutOffWhileAnOpenStreamIsNot() async throws {
        try await BridgeHarness.run(configure: {
            $0.readTimeout = .milliseconds(400)
            $0.heartbeatInterval = .milliseconds(150)
        }) { h in
            let (token, _) = try await h.session()
            let port = try #require(h.client.port)
            try await withEventStream(port: port, "/v1/events", token: token) { stream in
                try await stream.waitUntilOpen()
                // Half a request head, then silence: the bridge must hang up.
                let slow = try await RawConnection.open(port: port)
                try await slow.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                let closed = try await slow.waitUntilClosed(within: .seconds(10))
                #expect(closed, "a connection that never finished its request head stayed open")
                #expect(await slow.received.isEmpty, "no response is owed to a request never sent")
                // The stream has been open for more than twice the read timeout and still flows.
                try await Task.sleep(for: .milliseconds(900))
                #expect(await !stream.finished)
                let beats = await stream.comments
                try await stream.waitForComments(beyond: beats)
            }
            // A complete request on a fresh connection is still answered.
            let fresh = try await RawConnection.open(port: port)
            try await fresh.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            _ = try await fresh.waitUntilClosed(within: .seconds(2))
            #expect(await fresh.received.hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test func shutdownLetsACallInFlightFinishTellsStreamsAndEndsSessions() async throws {
        try await ShutdownRig.run(grace: .seconds(10)) { rig in
            let token = try await rig.newSession()
            try await withEventStream(port: rig.port, "/v1/events", token: token) { stream in
                try await stream.waitUntilOpen()
                // The call must be in flight (its connection open) before the shutdown: on a loaded
                // machine 200 ms was not always enough to connect.
                async let call = rig.post("/v1/methods/sleep", token: token, body: "[1500]")
                try await Task.sleep(for: .milliseconds(600))
                await rig.group.triggerGracefulShutdown()
                let reply = try await call
                #expect(reply.status == .ok, "the call in flight finishes within the grace period: \(reply.text)")
                #expect(reply.text.contains("\"result\""))
                try await stream.wait("the final event") { events in
                    events.contains { $0.event == "error" && $0.json["error"] == "shutting-down" }
                }
                try await stream.waitUntilFinished()
            }
            try await rig.waitUntilStopped()
            #expect(rig.registry.count == 0)
        }
    }

    @Test func aCallLongerThanTheGraceIsAnsweredWithAReasonAndTheBridgeStillStops() async throws {
        try await ShutdownRig.run(grace: .milliseconds(300)) { rig in
            let token = try await rig.newSession()
            async let call = rig.post("/v1/methods/sleep?timeout=60000", token: token, body: "[20000]")
            try await Task.sleep(for: .milliseconds(300))
            await rig.group.triggerGracefulShutdown()
            let reply = try await call
            #expect(reply.status == .serviceUnavailable, "\(reply.text)")
            #expect(reply.text.contains(#""error":"connection-closed""#) && reply.text.contains("shutting down"), "\(reply.text)")
            try await rig.waitUntilStopped()
            #expect(rig.registry.count == 0)
        }
    }
}

/// A bridge run the way `ddp-bridge serve` runs it: the application and the shutdown-grace
/// service in one service group, so a test can trigger the graceful shutdown a signal would.
struct ShutdownRig: Sendable {
    let group: ServiceGroup
    let registry: SessionRegistry
    let port: Int
    let stopped: AsyncStream<Void>

    struct Reply: Sendable {
        let status: HTTPResponse.Status
        let text: String
    }

    static func run(grace: Duration, _ body: @Sendable (ShutdownRig) async throws -> Void) async throws {
        let upstream = LocalDDPServer(configuration: DemoDataSet.configuration, logger: Logger(label: "upstream"))
        try await DemoDataSet.seed(upstream.core)
        try await upstream.start()
        var configuration = BridgeConfiguration(upstream: await upstream.url)
        configuration.shutdownGrace = grace
        var logger = Logger(label: "bridge")
        logger.logLevel = .warning
        let (ports, portSink) = AsyncStream<Int>.makeStream()
        let (application, registry) = BridgeApplication.make(
            configuration: configuration, http: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)), logger: logger,
            onServerRunning: { channel in portSink.yield(channel.localAddress?.port ?? 0) })
        let group = ServiceGroup(configuration: .init(services: [application, registry.shutdownGrace], logger: logger))
        let (stopped, stoppedSink) = AsyncStream<Void>.makeStream()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { stoppedSink.finish() }
                try await group.run()
            }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            do {
                try await body(ShutdownRig(group: group, registry: registry, port: port, stopped: stopped))
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        await upstream.stop()
    }

    func post(_ uri: String, token: String? = nil, body: String) async throws -> Reply {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            var headers: HTTPFields = [.contentType: "application/json"]
            if let token { headers[.authorization] = "Bearer \(token)" }
            let response = try await client.post(uri, headers: headers, body: ByteBuffer(string: body))
            return Reply(status: response.status, text: response.body.map { String(buffer: $0) } ?? "")
        }
    }

    func newSession() async throws -> String {
        let reply = try await post("/v1/sessions", body: "{}")
        #expect(reply.status == .created, "\(reply.text)")
        return try #require((try EJSONParser.parse(reply.text))["token"]?.stringValue)
    }

    /// Waits (bounded) until the service group has returned.
    func waitUntilStopped(within limit: Duration = .seconds(20)) async throws {
        let done = await withTaskGroup(of: Bool.self) { tasks in
            tasks.addTask { for await _ in stopped {}; return true }
            tasks.addTask { try? await Task.sleep(for: limit); return false }
            let first = await tasks.next() ?? false
            tasks.cancelAll()
            return first
        }
        #expect(done, "the bridge did not stop within \(limit)")
    }
}

/// A bare TCP connection, for requests no HTTP client would send (half a request head).
actor RawConnection {
    private let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
    private(set) var received = ""
    private var closed = false

    private init(channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>) { self.channel = channel }

    static func open(port: Int) async throws -> RawConnection {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
            }
        let connection = RawConnection(channel: channel)
        Task { await connection.read() }
        return connection
    }

    private func read() async {
        do {
            for try await buffer in channel.inbound { received += String(buffer: buffer) }
        } catch {}
        closed = true
    }

    func send(_ text: String) async throws { try await channel.outbound.write(ByteBuffer(string: text)) }

    /// Whether the peer closed the connection within `limit`.
    func waitUntilClosed(within limit: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while !closed, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        return closed
    }
}
