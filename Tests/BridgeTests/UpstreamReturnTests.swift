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

    static func inBackoff(_ session: Session, atLeast delay: Duration) -> Bool {
        if case .reconnecting(_, let wait, _) = session.connection { wait >= delay } else { false }
    }

    static func isConnected(_ session: Session) -> Bool {
        if case .connected = session.connection { true } else { false }
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
            try await eventually("every session waiting out a backoff of 4 s or more", timeout: .seconds(60)) {
                let sessions = h.registry.allSessions
                return sessions.count == count && sessions.allSatisfy { Self.inBackoff($0, atLeast: .seconds(4)) }
            }
            try await h.upstream.start(port: port)
            let returned = ContinuousClock.now
            try await eventually("every session connected again", timeout: .seconds(60)) {
                h.registry.allSessions.allSatisfy(Self.isConnected)
            }
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
            try await eventually("the session waiting out a backoff", timeout: .seconds(30)) {
                h.registry.allSessions.allSatisfy { Self.inBackoff($0, atLeast: .seconds(4)) }
            }
            try await h.upstream.start(port: port)
            let echo = try await h.request(.post, "/v1/methods/echo?timeout=3000", token: token, body: "[1]")
            #expect(echo.status == .ok, "\(echo.text)")
        }
    }
}
