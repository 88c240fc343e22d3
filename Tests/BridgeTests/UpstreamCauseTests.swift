import DDP
import FaultKit
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import Bridge

/// A bridge pointed at an upstream it cannot use says why, through real sockets: `/readyz`'s
/// `details.cause`, the 503 a request gets, the metrics and one warning in the log.
@Suite(.timeLimit(.minutes(1))) struct UpstreamCauseTests {
    /// A loopback port nothing listens on (bound, then closed), on an address no other test
    /// binds: a port freed on 127.0.0.1 was once taken by another test's server meanwhile.
    static func closedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.9", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        try await channel.close()
        return port
    }

    /// `/readyz` once its answer names a cause.
    static func readiness(_ bridge: BridgeHarness, within timeout: Duration) async throws -> BridgeHarness.Reply {
        try await bridge.readiness("/readyz to name the cause", timeout: timeout) { $0["details"]?["cause"] != nil }
    }

    @Test func aClosedPortIsConnectionRefusedInReadyzTheMetricsAndTheLog() async throws {
        let port = try await Self.closedPort()
        let (lines, logger) = LogLines.logger(level: .warning)
        try await BridgeHarness.run(upstreamURL: "ws://127.0.0.9:\(port)/websocket", logger: logger) { bridge in
            let ready = try await Self.readiness(bridge, within: .seconds(10))
            expectError(ready, .serviceUnavailable, "upstream-unavailable")
            let cause = try #require(ready["details"]?["cause"])
            #expect(cause["code"] == "connection-refused", "\(ready.text)")
            #expect(cause["message"]?.stringValue == "nothing is listening at 127.0.0.9:\(port) (connection refused)")
            #expect(cause["hint"]?.stringValue?.hasPrefix("start the Meteor app") == true)
            #expect(
                ready["reason"]?.stringValue
                    == "The upstream Meteor server is not reachable: nothing is listening at 127.0.0.9:\(port) (connection refused)")
            // Every failed attempt is counted by its cause; the log said it once.
            try await bridge.metrics("several attempts") {
                (metricSample($0, #"ddp_bridge_upstream_failures_total{cause="connection-refused"}"#) ?? 0) >= 3
            }
            let warnings = lines.all.filter { $0.contains("upstream connection failed") }
            #expect(warnings.count == 1, "\(lines.all)")
            #expect(warnings.first?.contains(#""ddp.cause":"connection-refused""#) == true, "\(warnings)")
        }
    }

    /// While the cause is known, a request that needs the upstream gets its 503 with the cause at
    /// once: not after `--connect-timeout` (five minutes here, past the suite's time limit).
    @Test func requestsThatNeedTheUpstreamFailAtOnceWhileTheCauseIsKnown() async throws {
        let port = try await Self.closedPort()
        let (lines, logger) = LogLines.logger(level: .warning)
        try await BridgeHarness.run(
            upstreamURL: "ws://127.0.0.9:\(port)/websocket", configure: { $0.connectTimeout = .seconds(300) }, logger: logger
        ) { bridge in
            _ = try await Self.readiness(bridge, within: .seconds(10))
            for _ in 0..<20 {
                let refused = try await bridge.request(.post, "/v1/sessions", body: "{}")
                expectError(refused, .serviceUnavailable, "upstream-unavailable")
                #expect(refused["details"]?["cause"]?["code"] == "connection-refused", "\(refused.text)")
                #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 >= 1)
            }
            // Twenty 503s in a row are one warning, then one every 10 s saying how many were held back
            // (a loaded machine may take more than 10 s for the twenty).
            let warnings = lines.all.filter { $0.contains("request failed") }
            #expect((1...3).contains(warnings.count), "\(warnings)")
            #expect(warnings.dropFirst().allSatisfy { $0.contains("held-back") }, "\(warnings)")
        }
    }

    /// An app that never answers an upgrade on `/` (as a Meteor app may) outlasts a session's
    /// wait: its 503 names the cause the bridge's other connections found meanwhile.
    @Test func anUpgradeNeverAnsweredIsNamedInA503BeforeTheSessionsOwnAttemptEnds() async throws {
        let silent = FakeUpstream(handshake: .stall)
        try await silent.start()
        let root = String(silent.url.dropLast("/websocket".count))
        try await BridgeHarness.run(
            upstreamURL: root,
            configure: {
                $0.ddp.connectTimeout = .seconds(1)
                $0.connectTimeout = .milliseconds(300)
            }
        ) { bridge in
            let ready = try await Self.readiness(bridge, within: .seconds(5))
            #expect(ready["details"]?["cause"]?["code"] == "timed-out", "\(ready.text)")
            let session = try await bridge.request(.post, "/v1/sessions", body: "{}")
            expectError(session, .serviceUnavailable, "upstream-unavailable")
            let cause = session["details"]?["cause"]
            #expect(cause?["message"] == "the WebSocket upgrade request for / got no answer within 1 s", "\(session.text)")
            #expect(cause?["hint"]?.stringValue?.hasSuffix("\(root)/websocket") == true, "\(session.text)")
        }
        await silent.stop()
    }

    @Test func aWebPageWhereDDPWasExpectedIsNamedAtOnceWithTheWebsocketHint() async throws {
        let page = FakeUpstream(handshake: .answer(status: 200, contentType: "text/html; charset=utf-8", body: "<!DOCTYPE html><html></html>"))
        try await page.start()
        let root = String(page.url.dropLast("/websocket".count))
        try await BridgeHarness.run(
            upstreamURL: root,
            configure: {
                $0.ddp.connectTimeout = .seconds(10)
                $0.connectTimeout = .milliseconds(500)
            }
        ) { bridge in
            // Well under the attempt's 10 s deadline: the answer fails the attempt as it arrives.
            let ready = try await Self.readiness(bridge, within: .seconds(5))
            expectError(ready, .serviceUnavailable, "upstream-unavailable")
            let cause = try #require(ready["details"]?["cause"])
            #expect(cause["code"] == "upgrade-refused", "\(ready.text)")
            #expect(cause["status"] == 200)
            #expect(cause["message"]?.stringValue?.contains("HTTP 200 (text/html)") == true, "\(ready.text)")
            #expect(cause["hint"]?.stringValue?.contains("add /websocket to the upstream URL") == true, "\(ready.text)")
            #expect(cause["hint"]?.stringValue?.hasSuffix("\(root)/websocket") == true, "\(ready.text)")
            // A request that needs the upstream gets the same cause in its 503.
            let session = try await bridge.request(.post, "/v1/sessions", body: "{}")
            expectError(session, .serviceUnavailable, "upstream-unavailable")
            #expect(session["details"]?["cause"]?["code"] == "upgrade-refused", "\(session.text)")
            #expect(session["details"]?["cause"]?["status"] == 200, "\(session.text)")
            #expect(session["reason"]?.stringValue?.hasPrefix("The upstream Meteor server is unreachable: the upstream answered") == true)
        }
        await page.stop()
    }
}
