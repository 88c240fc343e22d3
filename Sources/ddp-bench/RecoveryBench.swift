import DDP
import DDPServer
import Foundation
import NIOHTTP1

/// After a Meteor deploy: N sessions on the bridge (its own process), the upstream stopped long
/// enough for their backoffs to grow, then started again on the same port. The figure is the time
/// from the upstream's return until the bridge reports every session connected again, against
/// N / `--reconnect-rate` + 2 s (the pacer's pace plus the readiness probe's second).
enum RecoveryBench {
    struct Result: Sendable {
        let sessions: Int
        let rate: Double
        let awaySeconds: Double
        let secondsBack: Double
        var bound: Double { Double(sessions) / rate + 2 }
    }

    /// The number in `ddp_bridge_upstream_connections{state="connected"}`, from `/metrics`.
    static func connected(port: Int) async throws -> Int {
        let reply = try await HTTP.request(port: port, .GET, "/metrics")
        guard reply.status == 200 else { throw BenchError("/metrics answered \(reply.status)") }
        let prefix = #"ddp_bridge_upstream_connections{state="connected"} "#
        guard let line = reply.body.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
            let count = Double(line.dropFirst(prefix.count)), count.isFinite, count >= 0, count < 1e9
        else { throw BenchError("/metrics has no count of connected sessions") }
        return Int(count)
    }

    /// Reads the count every `every` until `condition` holds; the instant it was first seen to.
    /// The bridge is another process, so its metrics are read at intervals: the figure's
    /// resolution is `every`.
    static func waitFor(port: Int, timeout: Duration, every: Duration = .milliseconds(25), _ condition: (Int) -> Bool) async throws
        -> ContinuousClock.Instant
    {
        let deadline = ContinuousClock.now + timeout
        while true {
            let last = try await connected(port: port)
            if condition(last) { return .now }
            guard ContinuousClock.now < deadline else { throw BenchError("sessions connected stayed at \(last) for \(timeout)") }
            try await Task.sleep(for: every)
        }
    }

    static func run(sessions count: Int, rate: Double, away: Duration) async throws -> Result {
        let upstream = try await startUpstream()
        do {
            let result = try await measure(upstream, sessions: count, rate: rate, away: away)
            await upstream.stop()
            return result
        } catch {
            await upstream.stop()
            throw error
        }
    }

    private static func measure(_ upstream: LocalDDPServer, sessions count: Int, rate: Double, away: Duration) async throws -> Result {
        guard let upstreamPort = await upstream.port else { throw BenchError("the upstream has no port") }
        let bridge = try await BridgeProcess.start(
            upstream: await upstream.url,
            arguments: ["--reconnect-rate", String(Int(rate)), "--session-idle-timeout", "3600"])
        defer { bridge.stop() }
        try await forEachBounded(count, concurrency: 32) { _ in _ = try await HTTP.session(port: bridge.port) }
        _ = try await waitFor(port: bridge.port, timeout: .seconds(60)) { $0 >= count }
        await upstream.stop()
        _ = try await waitFor(port: bridge.port, timeout: .seconds(60)) { $0 == 0 }
        try await Task.sleep(for: away)
        _ = try await upstream.start(port: upstreamPort)
        let returned = ContinuousClock.now
        let back = try await waitFor(port: bridge.port, timeout: .seconds(Double(count) / rate * 4 + 60)) { $0 >= count }
        return Result(sessions: count, rate: rate, awaySeconds: away.seconds, secondsBack: (back - returned).seconds)
    }
}
