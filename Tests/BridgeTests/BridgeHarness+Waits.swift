import DDP
import DDPClient
import DDPServer
import FaultKit
import HTTPTypes
import Testing
import Timing

@testable import Bridge

/// How the bridge tests wait. On what a session's upstream connection does: on the connection
/// itself (`DDPClient.waitUntil`, checked after each of its steps). On what only a request shows
/// (the readiness probe's state, the book-keeping `/metrics` reports): a poll, in one place each.
extension BridgeHarness {
    /// The upstream connection of the session `token` names.
    func upstreamConnection(of token: String) throws -> DDPClient {
        let hash = SessionToken.hash(token)
        return try #require(registry.allSessions.first { $0.user?.tokenHash == hash }, "no session for the token").client
    }

    /// Waits until `condition` holds for the upstream connection of the session `token` names:
    /// checked now and after each step of that connection (a message, a timer, a call).
    func waitUntil(
        _ what: String, session token: String, timeout: Duration = .seconds(10),
        _ condition: @escaping @Sendable (isolated DDPClient) -> Bool
    ) async throws {
        let connection = try upstreamConnection(of: token)
        do {
            try await connection.waitUntil(timeout: timeout, condition)
        } catch let error as DDPClientError where error.code == .timedOut {
            throw ConditionNotMet(description: "\(what) did not hold within \(timeout)")
        }
    }

    /// The DDP session (the upstream's `connected` id) of the session `token` names, while connected.
    func upstreamSession(of token: String) async throws -> String? {
        let connection = try upstreamConnection(of: token)
        return if case .connected(let session, _) = await connection.state { session } else { nil }
    }

    /// Waits until the session's connection is up and its view live: what `GET /v1/session`
    /// reports as `connected` (not `resyncing`); with `previous`, on another DDP session than it
    /// (connected again after a drop, not still on the connection that dropped).
    func waitUntilLive(_ what: String, session token: String, after previous: String? = nil, timeout: Duration = .seconds(10)) async throws {
        try await waitUntil(what, session: token, timeout: timeout) { connection in
            guard case .connected(let session, _) = connection.state, session != previous else { return false }
            return !connection.isResyncing
        }
    }

    /// `/readyz` once `condition` holds for its answer. A poll: the readiness probe's connection
    /// is the bridge's own, and nothing outside it reports its state but this route.
    @discardableResult
    func readiness(_ what: String, timeout: Duration = .seconds(10), until condition: (Reply) -> Bool) async throws -> Reply {
        var last: Reply?
        try await eventually(what, timeout: timeout) {
            let reply = try await request(.get, "/readyz")
            last = reply
            return condition(reply)
        }
        return try #require(last)
    }

    /// `/metrics` once `condition` holds for its text. A poll: the gauges are the bridge's
    /// book-keeping (readers, stream slots, the memory budget, failed attempts), set when
    /// scraped, and no event says they changed.
    @discardableResult
    func metrics(_ what: String, timeout: Duration = .seconds(10), until condition: (String) -> Bool) async throws -> String {
        var last = ""
        do {
            try await eventually(what, timeout: timeout) {
                last = try await request(.get, "/metrics").text
                return condition(last)
            }
        } catch let error as ConditionNotMet {
            // What the bridge said last, its non-zero samples: what the condition did not find.
            let samples = last.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.hasSuffix(" 0") && !$0.contains("_bucket{") }
            let said = samples.prefix(60).joined(separator: "\n")
            throw ConditionNotMet(description: "\(error.description); the last scrape's non-zero samples:\n" + said)
        }
        return last
    }
}

extension ServerCore {
    /// Waits until `condition` holds for what the in-process upstream saw (checked as it changes:
    /// ``DDPServer/ServerCore/waitUntil(timeout:_:)``), naming what it waited for when it does not come.
    func wait(_ what: String, timeout: Duration = .seconds(10), until condition: @escaping @Sendable (isolated ServerCore) -> Bool) async throws {
        do {
            try await waitUntil(timeout: timeout, condition)
        } catch DeadlineError.timedOut {
            throw ConditionNotMet(description: "\(what) did not hold within \(timeout) at the upstream")
        }
    }
}
