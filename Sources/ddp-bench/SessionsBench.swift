import NIOHTTP1
import DDP
import Foundation
import NIOConcurrencyHelpers

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

    static func bridgeBinary() throws -> String {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("ddp-bridge").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchError("\(path) is missing: build the ddp-bridge product in the same configuration")
        }
        return path
    }

    static func rssKiB(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    /// One session with a `tasks` subscription and an open stream.
    static func openOne(port: Int, into streams: NIOLockedValueBox<[SSEConsumer]>) async throws {
        let token = try await HTTP.session(port: port)
        let parts = ProcessInfo.processInfo.environment["DDP_BENCH_SESSION_PARTS"] ?? "sub,stream"
        if !parts.contains("sub") && !parts.contains("stream") { return }
        let sub = try await HTTP.request(port: port, .POST, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
        guard sub.status == 201 || sub.status == 200 else { throw BenchError("subscribe failed: \(sub.status) \(sub.body)") }
        if !parts.contains("stream") { return }
        let stream = try await SSEConsumer.open(port: port, "/v1/events?collections=tasks", token: token, counting: "added")
        try await stream.waitUntilOpen()
        streams.withLockedValue { $0.append(stream) }
    }

    static func run(upstream: String, sessions count: Int, concurrency: Int = 32) async throws -> Result {
        let process = Process()
        // DDP_BENCH_WRAP runs the bridge under a profiler, e.g. "valgrind --tool=massif".
        let wrapper = ProcessInfo.processInfo.environment["DDP_BENCH_WRAP"].map { $0.split(separator: " ").map(String.init) } ?? []
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = wrapper + [try bridgeBinary(), "serve", "--upstream", upstream, "--port", "0", "--log-level", "notice", "--public-dir", "none",
                             "--max-sessions", "100000", "--max-sessions-per-address", "100000", "--login-rate-limit", "1000000",
                             "--max-subscriptions-per-session", "10"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let output = NIOLockedValueBox("")
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if !data.isEmpty { output.withLockedValue { $0 += String(decoding: data, as: UTF8.self) } }
        }
        try process.run()
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            pipe.fileHandleForReading.readabilityHandler = nil
        }
        var port = 0
        let deadline = ContinuousClock.now + .seconds(wrapper.isEmpty ? 30 : 300)
        while port == 0 {
            guard ContinuousClock.now < deadline, process.isRunning else {
                throw BenchError("the bridge process did not start: \(output.withLockedValue { $0 })")
            }
            try await Task.sleep(for: .milliseconds(20))
            let text = output.withLockedValue { $0 }
            if let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) {
                port = Int(text[range].split(separator: ":").last ?? "") ?? 0
            }
        }
        try await Task.sleep(for: .seconds(1))
        let before = rssKiB(process.processIdentifier)
        let start = ContinuousClock.now
        let streams = NIOLockedValueBox<[SSEConsumer]>([])
        let bound = port
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            while next < min(concurrency, count) {
                group.addTask { try await openOne(port: bound, into: streams) }
                next += 1
            }
            while try await group.next() != nil {
                if next < count {
                    group.addTask { try await openOne(port: bound, into: streams) }
                    next += 1
                }
            }
        }
        let seconds = (ContinuousClock.now - start).seconds
        try await Task.sleep(for: .seconds(2))
        let after = rssKiB(process.processIdentifier)
        let open = streams.withLockedValue { $0 }
        let closedEarly = open.filter { $0.snapshot.closed }.count
        for stream in open { stream.close() }
        guard closedEarly == 0 else { throw BenchError("\(closedEarly) of \(count) streams closed early") }
        process.terminate()
        return Result(sessions: count, secondsToOpen: seconds, rssBeforeKiB: before, rssAfterKiB: after)
    }
}
