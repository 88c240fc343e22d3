import DDP
import FaultKit
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import DDPClient

/// Each failed attempt names its cause, through real loopback sockets: a closed port, a web
/// page where DDP was expected (answered at once, not at the deadline), an upgrade never
/// answered; and the log says so once per change of cause, not once per retry.
@Suite(.timeLimit(.minutes(1))) struct UpstreamCauseTests {
    /// A loopback port nothing listens on (bound, then closed), on an address no other test
    /// binds: a port freed on 127.0.0.1 was once taken by another test's server meanwhile.
    static func closedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.9", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        try await channel.close()
        return port
    }

    /// The causes of a client's first `count` failed attempts at `url` (fewer if it connects
    /// first, unless `pastConnected`), and how long the first took.
    static func failures(
        _ url: String, count: Int, pastConnected: Bool = false, logger: Logger = Logger(label: "test-client"),
        configure: (inout DDPClientOptions) -> Void = { _ in }
    ) async throws -> (causes: [UpstreamFailure?], first: Duration) {
        var options = DDPClientOptions(url: url)
        options.protocolConfiguration.reconnect = ReconnectPolicy(initialDelay: .milliseconds(20), multiplier: 1, maxDelay: .milliseconds(20))
        configure(&options)
        let (states, continuation) = AsyncStream<ConnectionState>.makeStream()
        let client = DDPClient(
            options: options, logger: logger,
            events: ClosureEventSink { event in
                if case .stateChanged(let state) = event { continuation.yield(state) }
            })
        let started = ContinuousClock.now
        await client.start()
        var causes: [UpstreamFailure?] = []
        var first = Duration.zero
        for await state in states {
            if case .connected = state, !pastConnected { break }
            guard case .reconnecting(_, _, let cause) = state else { continue }
            if causes.isEmpty { first = ContinuousClock.now - started }
            causes.append(cause)
            if causes.count == count { break }
        }
        await client.close()
        return (causes, first)
    }

    @Test func aClosedPortIsRefusedAndLoggedOnceForEveryRetry() async throws {
        let port = try await Self.closedPort()
        let log = RecordedLog()
        var logger = Logger(label: "test-client") { _ in RecordingLogHandler(recorded: log) }
        logger.logLevel = .warning
        let url = "ws://127.0.0.9:\(port)/websocket"
        let (causes, _) = try await Self.failures(url, count: 4, logger: logger)
        #expect(causes.count == 4)
        for cause in causes {
            #expect(cause?.cause == .connectionRefused(endpoint: "127.0.0.9:\(port)"), "\(String(describing: cause))")
            #expect(cause?.url == url)
        }
        let warnings = log.messages.filter { $0.hasPrefix("upstream connection failed: ") }
        #expect(
            warnings == [
                "upstream connection failed: nothing is listening at 127.0.0.9:\(port) (connection refused); "
                    + "start the Meteor app, or correct the host and port of the upstream URL"
            ], "one warning for four attempts: \(log.messages)")
    }

    @Test func aWebPageWhereDDPWasExpectedFailsAtOnceNamingTheStatusAndThePath() async throws {
        let page = FakeUpstream(handshake: .answer(status: 200, contentType: "text/html; charset=utf-8", body: "<!DOCTYPE html><html></html>"))
        try await page.start()
        let root = String(page.url.dropLast("/websocket".count))
        let (causes, first) = try await Self.failures(root, count: 2) { $0.protocolConfiguration.connectTimeout = .seconds(10) }
        await page.stop()
        let cause = try #require(causes.first ?? nil)
        #expect(cause.cause == .upgradeRefused(status: 200, contentType: "text/html; charset=utf-8"))
        #expect(cause.httpStatus == 200)
        #expect(cause.hint?.contains("add /websocket to the upstream URL") == true, "\(cause)")
        #expect(cause.hint?.hasSuffix(root + "/websocket") == true, "\(cause)")
        #expect(first < .seconds(2), "answered at once, not at the 10 s deadline: \(first)")
    }

    @Test func anUpgradeNeverAnsweredIsCutAtItsDeadlineNamingTheStage() async throws {
        let silent = FakeUpstream(handshake: .stall)
        try await silent.start()
        let root = String(silent.url.dropLast("/websocket".count))
        let (causes, _) = try await Self.failures(root, count: 1) { $0.protocolConfiguration.connectTimeout = .milliseconds(300) }
        await silent.stop()
        let cause = try #require(causes.first ?? nil)
        #expect(cause.cause == .timedOut(.upgrade, after: .milliseconds(300)))
        #expect(cause.message == "the WebSocket upgrade request for / got no answer within 0.3 s")
        #expect(cause.hint?.contains(root + "/websocket") == true)
    }

    @Test func aDDPServerThatNeverSaysConnectedIsAHandshakeTimeout() async throws {
        let mute = FakeUpstream { connection in
            while true { _ = try await connection.receive() }
        }
        try await mute.start()
        // Long enough for the WebSocket upgrade on a loaded machine (with 300 ms, one run in five
        // of the parallel suite timed out in the upgrade, not in the DDP handshake).
        let (causes, _) = try await Self.failures(mute.url, count: 1) { $0.protocolConfiguration.connectTimeout = .seconds(2) }
        await mute.stop()
        #expect(causes.first??.cause == .timedOut(.handshake, after: .seconds(2)))
    }

    @Test func anUpstreamThatClosesAfterConnectedSaysSo() async throws {
        let closing = FakeUpstream { connection in
            try await connection.handshake()
            await connection.close()
        }
        try await closing.start()
        let (causes, _) = try await Self.failures(closing.url, count: 1, pastConnected: true)
        await closing.stop()
        #expect(causes.first??.cause == .closed(.open))
    }

    /// The failure log: a warning when the cause changes, none while it stays, a fresh one after a success.
    @Test func theFailureLogWarnsOncePerChangeOfCause() {
        let log = RecordedLog()
        var logger = Logger(label: "test") { _ in RecordingLogHandler(recorded: log) }
        logger.logLevel = .info
        let failures = UpstreamFailureLog()
        let refused = UpstreamFailure(.connectionRefused(endpoint: "h:1"))
        failures.failed(refused, logger: logger)
        failures.failed(refused, logger: logger)
        failures.failed(UpstreamFailure(.upgradeRefused(status: 404, contentType: nil)), logger: logger)
        failures.failed(refused, logger: logger)
        #expect(failures.failure == refused)
        failures.connected(logger: logger)
        failures.connected(logger: logger)
        failures.failed(refused, logger: logger)
        #expect(log.messages.filter { $0.hasPrefix("upstream connection failed") }.count == 4)
        #expect(log.messages.filter { $0 == "upstream connection restored" }.count == 1)
    }
}
