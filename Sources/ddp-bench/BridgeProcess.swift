import Foundation
import NIOConcurrencyHelpers

/// The bridge as its own process (so its memory is its own), started from the binary built beside
/// this one, listening on a free loopback port, with the limits a load run needs raised.
struct BridgeProcess: Sendable {
    let process: Process
    let port: Int
    private let pipe: Pipe
    let output: NIOLockedValueBox<String>

    static func binary() throws -> String {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("ddp-bridge").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw BenchError("\(path) is missing: build the ddp-bridge product in the same configuration")
        }
        return path
    }

    /// Resident memory of a process, from `/proc`; 0 when it is gone.
    static func rssKiB(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    var rssKiB: Int { Self.rssKiB(process.processIdentifier) }

    /// Starts `ddp-bridge serve` in front of `upstream` with `arguments` added; waits (bounded) for its port.
    static func start(upstream: String, arguments extra: [String] = []) async throws -> BridgeProcess {
        let process = Process()
        // DDP_BENCH_WRAP runs the bridge under a profiler, e.g. "valgrind --tool=massif".
        let wrapper = ProcessInfo.processInfo.environment["DDP_BENCH_WRAP"].map { $0.split(separator: " ").map(String.init) } ?? []
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            wrapper + [
                try binary(), "serve", "--upstream", upstream, "--port", "0", "--log-level", "notice", "--public-dir", "none",
                "--max-sessions", "100000", "--max-sessions-per-address", "100000", "--login-rate-limit", "1000000",
                "--session-rate-limit", "1000000", "--max-connections-per-address", "10000000"
            ] + extra
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let output = NIOLockedValueBox("")
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if !data.isEmpty { output.withLockedValue { $0 += String(decoding: data, as: UTF8.self) } }
        }
        try process.run()
        var port = 0
        let deadline = ContinuousClock.now + .seconds(wrapper.isEmpty ? 30 : 300)
        while port == 0 {
            guard ContinuousClock.now < deadline, process.isRunning else {
                if process.isRunning { process.terminate() }
                throw BenchError("the bridge process did not start: \(output.withLockedValue { $0 })")
            }
            try await Task.sleep(for: .milliseconds(20))
            let text = output.withLockedValue { $0 }
            if let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) {
                port = Int(text[range].split(separator: ":").last ?? "") ?? 0
            }
        }
        Priority.level(process.processIdentifier)
        try await Task.sleep(for: .seconds(1))
        return BridgeProcess(process: process, port: port, pipe: pipe, output: output)
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        pipe.fileHandleForReading.readabilityHandler = nil
    }
}
