import DDP
import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1

/// Session scale: the bridge as its own process (so its memory is its own), sessions opened
/// against it, each with one subscription and one open event stream.
enum SessionsBench {
    struct Result: Sendable {
        let sessions: Int
        let secondsToOpen: Double
        let rssBeforeKiB: Int
        let rssAfterKiB: Int
        var kibPerSession: Double { Double(rssAfterKiB - rssBeforeKiB) / Double(sessions) }
    }

    /// One session with a `tasks` subscription and an open stream.
    static func openOne(port: Int, into streams: NIOLockedValueBox<[SSEConsumer]>) async throws {
        let token = try await HTTP.session(port: port)
        let parts = ProcessInfo.processInfo.environment["DDP_BENCH_SESSION_PARTS"] ?? "sub,stream"
        if !parts.contains("sub") && !parts.contains("stream") { return }
        // Under thousands of sessions the upstream may be slow to answer: a 503/504 (it did not
        // answer in time) is retried, a bounded number of times, rather than ending the run.
        var attempt = 0
        while true {
            attempt += 1
            let sub = try await HTTP.request(port: port, .POST, "/v1/subscriptions", token: token, body: #"{"name":"tasks","timeout":30000}"#)
            if sub.status == 201 || sub.status == 200 { break }
            guard [503, 504].contains(sub.status), attempt < 4 else {
                throw BenchError("subscribe failed: \(sub.status) \(sub.body) (attempt \(attempt))")
            }
            try await Task.sleep(for: .milliseconds(200 * attempt))
        }
        if !parts.contains("stream") { return }
        let stream = try await SSEConsumer.open(port: port, "/v1/events?collections=tasks", token: token, counting: "added")
        try await stream.waitUntilOpen()
        streams.withLockedValue { $0.append(stream) }
    }

    static func run(upstream: String, sessions count: Int, concurrency: Int = 32) async throws -> Result {
        let bridge = try await BridgeProcess.start(upstream: upstream, arguments: ["--max-subscriptions-per-session", "10"])
        defer { bridge.stop() }
        let process = bridge.process
        let port = bridge.port
        let before = BridgeProcess.rssKiB(process.processIdentifier)
        let start = ContinuousClock.now
        let streams = NIOLockedValueBox<[SSEConsumer]>([])
        try await forEachBounded(count, concurrency: concurrency) { _ in try await openOne(port: port, into: streams) }
        let seconds = (ContinuousClock.now - start).seconds
        try await Task.sleep(for: .seconds(2))
        let after = BridgeProcess.rssKiB(process.processIdentifier)
        let open = streams.withLockedValue { $0 }
        let closedEarly = open.filter { $0.snapshot.closed }.count
        for stream in open { stream.close() }
        guard closedEarly == 0 else { throw BenchError("\(closedEarly) of \(count) streams closed early") }
        return Result(sessions: count, secondsToOpen: seconds, rssBeforeKiB: before, rssAfterKiB: after)
    }
}
