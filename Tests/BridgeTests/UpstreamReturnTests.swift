import DDP
import DDPClient
import DDPServer
import FaultKit
import Foundation
import HTTPTypes
import Testing

@testable import Bridge

/// Right after the upstream comes back (a Meteor deploy), sessions are right back: a session
/// waiting out a backoff that grew during the outage retries as soon as any connection of the
/// bridge is connected again (the readiness probe looks every second), through the reconnect
/// pacer, and a request for a session in a backoff brings its retry forward.
@Suite struct UpstreamReturnTests {
    /// The sessions' settings: backoffs of 4 s and more, no jitter (so without the wake-up every
    /// session would wait at least 4 s after the upstream's return), and a pacer of `rate`.
    static func configure(_ configuration: inout BridgeConfiguration, rate: Double, sessions: Int) {
        configuration.ddp.reconnect = ReconnectPolicy(initialDelay: .seconds(4), multiplier: 2, maxDelay: .seconds(60), jitter: 0)
        configuration.reconnectRate = rate
        configuration.reconnectBurst = 20
        configuration.maxSessionsPerAddress = sessions + 10
        configuration.sessionRateLimit = (sessions + 10, .seconds(10))
        configuration.maxConnectionsPerAddress = sessions + 64
    }

    static func inBackoff(_ connection: ConnectionState, atLeast delay: Duration) -> Bool {
        if case .reconnecting(_, let wait, _) = connection { wait >= delay } else { false }
    }

    /// Waits until every one of `sessions` is in a backoff of `delay` or more at once: each is
    /// waited for as its connection reports; one seen between two attempts (an attempt at a
    /// stopped upstream ends at once) is waited for again, all within `timeout`.
    static func waitUntilAllInBackoff(_ sessions: [Session], atLeast delay: Duration, timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while let waiting = sessions.first(where: { !inBackoff($0.connection, atLeast: delay) }) {
            let left = deadline - .now
            guard left > .zero else { throw ConditionNotMet(description: "every session in a backoff of \(delay) or more within \(timeout)") }
            try await waiting.client.waitUntil(timeout: left) { inBackoff($0.state, atLeast: delay) }
        }
    }

    /// Before, sessions waited out their backoff: with 50 sessions and the upstream away 12 s, the
    /// last came back 26.2 s after it returned. Now all N are back within N / rate + 2 s.
    /// 1,000 sessions with the heavy tests (`DDP_BRIDGE_HEAVY_TESTS=1`), 100 otherwise.
    @Test func sessionsInABackoffComeBackAsSoonAsTheUpstreamReturns() async throws {
        let count = ProcessInfo.processInfo.environment["DDP_BRIDGE_HEAVY_TESTS"] != nil ? 1_000 : 100
        let rate = 500.0
        try await BridgeHarness.run(configure: { Self.configure(&$0, rate: rate, sessions: count) }) { h in
            for _ in 0..<count { _ = try await h.session() }
            let port = try #require(await h.upstream.port)
            await h.upstream.stop()
            let sessions = h.registry.allSessions
            #expect(sessions.count == count)
            try await Self.waitUntilAllInBackoff(sessions, atLeast: .seconds(4), timeout: .seconds(60))
            try await h.upstream.start(port: port)
            let returned = ContinuousClock.now
            // Connected stays connected (the upstream stays up): one after another is every one at once.
            for session in sessions { try await session.client.waitUntil(timeout: .seconds(60)) { $0.isConnected } }
            let took = ContinuousClock.now - returned
            let bound = Duration.seconds(Double(count) / rate + 2)
            #expect(took < bound, "\(count) sessions took \(took) to come back; the bound is \(bound)")
        }
    }

    /// A request for a session in a backoff is answered within its timeout once the upstream is
    /// back, not after the backoff (the session's request asks for a retry; the readiness probe's
    /// return wakes it too).
    @Test func aRequestForASessionInABackoffIsAnsweredOnceTheUpstreamIsBack() async throws {
        try await BridgeHarness.run(configure: { Self.configure(&$0, rate: 100, sessions: 1) }) { h in
            let (token, _) = try await h.session()
            let port = try #require(await h.upstream.port)
            await h.upstream.stop()
            try await Self.waitUntilAllInBackoff(h.registry.allSessions, atLeast: .seconds(4), timeout: .seconds(30))
            try await h.upstream.start(port: port)
            let echo = try await h.request(.post, "/v1/methods/echo?timeout=3000", token: token, body: "[1]")
            #expect(echo.status == .ok, "\(echo.text)")
        }
    }
}
