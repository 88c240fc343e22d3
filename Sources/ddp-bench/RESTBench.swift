import DDP
import DDPClient
import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// REST throughput with `wrk` (a second process), against a bare Hummingbird route returning
/// the same bytes and against direct DDP method calls to the same upstream.
enum RESTBench {
    struct Load: Sendable {
        let requestsPerSecond: Double
        let p50: Double  // milliseconds
        let p99: Double
    }

    static let connections = 64
    static let threads = 2

    /// Runs wrk for `seconds` against `url`; `script` is a Lua file (for POST).
    static func wrk(_ url: String, seconds: Double, token: String? = nil, script: String? = nil) throws -> Load {
        var arguments = ["-t\(threads)", "-c\(connections)", "-d\(max(1, Int(seconds.rounded())))s", "--latency", "--timeout", "10s"]
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        if let script { arguments += ["-s", script] }
        arguments.append(url)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["wrk"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("wrk failed: \(output)") }
        if let errors = output.split(separator: "\n").first(where: { $0.contains("Non-2xx") }) {
            throw BenchError("wrk saw error answers (\(errors.trimmingCharacters(in: .whitespaces))) from \(url)")
        }
        func latency(_ label: String) -> Double {
            guard let line = output.split(separator: "\n").first(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix(label) }) else {
                return 0
            }
            let text = line.split(separator: " ", omittingEmptySubsequences: true).last.map(String.init) ?? ""
            for (unit, scale) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0)] where text.hasSuffix(unit) {
                return (Double(text.dropLast(unit.count)) ?? 0) * scale
            }
            return 0
        }
        let rps =
            output.split(separator: "\n").first { $0.hasPrefix("Requests/sec:") }
            .flatMap { Double($0.split(separator: " ").last.map(String.init) ?? "") } ?? 0
        return Load(requestsPerSecond: rps, p50: latency("50%"), p99: latency("99%"))
    }

    /// `workers` concurrent callers of `echo` over one DDP connection for `seconds`.
    static func directCalls(url: String, seconds: Double, workers: Int) async throws -> Load {
        let (client, runner) = try await connectedClient(url: url)
        defer { runner.cancel() }
        let samples = NIOLockedValueBox<[Double]>([])
        let start = ContinuousClock.now
        let end = start + .milliseconds(Int64(seconds * 1000))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    var mine: [Double] = []
                    while ContinuousClock.now < end {
                        let t0 = ContinuousClock.now
                        _ = try await client.call("echo", params: ["x"], timeout: .seconds(10))
                        mine.append((ContinuousClock.now - t0).seconds * 1000)
                    }
                    samples.withLockedValue { $0 += mine }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = (ContinuousClock.now - start).seconds
        await client.close()
        let sorted = samples.withLockedValue { $0 }.sorted()
        return Load(requestsPerSecond: Double(sorted.count) / elapsed, p50: Stats.percentile(sorted, 50), p99: Stats.percentile(sorted, 99))
    }

    /// A bare Hummingbird route answering `path` with `body` (the HTTP ceiling).
    static func bareServer(path: String, body: String) async throws -> RunningServer {
        try await RunningServer.start { onRunning in
            let router = Router()
            let bytes = ByteBuffer(string: body)
            router.get(RouterPath(path)) { _, _ in
                Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: bytes))
            }
            return Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), onServerRunning: onRunning,
                logger: quietLogger)
        }
    }
}
