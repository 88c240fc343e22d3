import DDP
import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1

/// The load run (issue: "never crash, never wedge"): the bridge as its own process while
/// `sessions` sessions are opened and closed from one client, `slowConsumers` sessions each
/// subscribe to a ticker (a steady flood of upstream changes) and read their event streams far
/// slower than it arrives, and a prober asks `/healthz` every 25 ms and samples the bridge's RSS.
/// It fails (throws) when the bridge dies, a session cannot be opened or closed, or the peak RSS
/// goes over `memoryBoundMiB`; latency is reported against the 100 ms goal, not asserted.
enum LoadRun {
    struct Plan: Sendable {
        var sessions: Int
        var slowConsumers: Int
        /// Changes per second each ticker subscription sends.
        var tickRate: Int
        /// How long the flood goes on after the sessions are done.
        var settle: Duration
        var memoryBoundMiB: Int
        /// Runs this process (the clients and the upstream) at nice 10 once the bridge is started,
        /// standing in for clients and a Meteor server on other machines.
        var niceGenerator = true
    }

    struct Outcome: Sendable {
        var sessionsPerSecond = 0.0
        var healthSamples: [Double] = []  // milliseconds
        var rssBeforeMiB = 0.0
        var rssPeakMiB = 0.0
        var rssAfterMiB = 0.0
        var consumersCut = 0
        /// Session creations answered 503 (and retried) during the churn.
        var sessionsRefused = 0
        var eventsRead = 0
        var seconds = 0.0
    }

    static func run(upstream: String, plan: Plan) async throws -> Outcome {
        let bridge = try await BridgeProcess.start(upstream: upstream, arguments: ["--max-subscriptions-per-session", "10"])
        defer { bridge.stop() }
        guard plan.niceGenerator else { return try await generate(plan: plan, bridge: bridge) }
        // Nice 10 for every thread of this process (threads made later inherit it), then the
        // measurement's priority back: the parts after this one (their readers in this process,
        // their servers started from it) must not run at nice 10 beside processes that do not.
        Priority.setOwn(10)
        defer {
            if !Priority.levelOwn() {
                FileHandle.standardError.write(Data("ddp-bench: could not give the harness its priority back; later parts may run at nice 10\n".utf8))
            }
        }
        return try await generate(plan: plan, bridge: bridge)
    }

    /// The load itself, against the running `bridge`.
    private static func generate(plan: Plan, bridge: BridgeProcess) async throws -> Outcome {
        let port = bridge.port
        var outcome = Outcome()
        outcome.rssBeforeMiB = Double(bridge.rssKiB) / 1024
        let started = ContinuousClock.now

        // The prober: /healthz on a kept-alive connection, and the bridge's RSS.
        let samples = NIOLockedValueBox<(latencies: [Double], peakKiB: Int)>(([], 0))
        let probing = NIOLockedValueBox(true)
        let prober = Task {
            try await HTTP.withConnection(port: port) { connection in
                while probing.withLockedValue({ $0 }) && !Task.isCancelled {
                    let start = ContinuousClock.now
                    let reply = try await connection.send(.GET, "/healthz")
                    let milliseconds = (ContinuousClock.now - start).seconds * 1000
                    guard reply.status == 200 else { throw BenchError("/healthz answered \(reply.status)") }
                    let rss = bridge.rssKiB
                    samples.withLockedValue {
                        $0.latencies.append(milliseconds)
                        $0.peakKiB = max($0.peakKiB, rss)
                    }
                    try await Task.sleep(for: .milliseconds(25))
                }
            }
        }
        defer { prober.cancel() }

        // Slow consumers, each with a ticker flooding its stream.
        say("load: \(plan.slowConsumers) slow consumers on tickers at \(plan.tickRate)/s each…")
        let consumers = NIOLockedValueBox<[(token: String, stream: SSEConsumer)]>([])
        try await forEachBounded(plan.slowConsumers, concurrency: 16) { _ in
            let token = try await HTTP.session(port: port)
            let sub = try await HTTP.request(
                port: port, .POST, "/v1/subscriptions", token: token,
                body: #"{"name":"ticker","params":[\#(plan.tickRate),0]}"#)
            guard sub.status == 201 else { throw BenchError("a ticker subscription failed: \(sub.status) \(sub.body)") }
            let stream = try await SSEConsumer.open(port: port, "/v1/events?collections=ticks", token: token, counting: "changed", slow: true)
            stream.readOnce()
            consumers.withLockedValue { $0.append((token, stream)) }
        }
        // They read 4 KiB every 250 ms: far less than the tickers send.
        let reader = Task {
            while !Task.isCancelled {
                for consumer in consumers.withLockedValue({ $0 }) { consumer.stream.readOnce() }
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        defer { reader.cancel() }

        // Sessions opened and closed from one client, 32 at a time, each worker on one connection.
        say("load: \(plan.sessions) sessions opened and closed…")
        let churnStart = ContinuousClock.now
        let refused = NIOLockedValueBox(0)
        let workers = 32
        do {
            try await forEachBounded(workers, concurrency: workers) { worker in
                let share = plan.sessions / workers + (worker < plan.sessions % workers ? 1 : 0)
                try await HTTP.withConnection(port: port) { connection in
                    for _ in 0..<share {
                        // A 503 (the upstream did not connect the new session in time: the
                        // generator's own upstream runs at a lower priority) is counted and retried.
                        var created = try await connection.send(.POST, "/v1/sessions", body: "{}")
                        var attempt = 1
                        while created.status == 503, attempt < 5 {
                            refused.withLockedValue { $0 += 1 }
                            try await Task.sleep(for: .milliseconds(100 * attempt))
                            created = try await connection.send(.POST, "/v1/sessions", body: "{}")
                            attempt += 1
                        }
                        guard created.status == 201, let token = created.json["token"]?.stringValue else {
                            throw BenchError("session creation failed: \(created.status) \(created.body) (attempt \(attempt))")
                        }
                        let closed = try await connection.send(.DELETE, "/v1/session", token: token)
                        guard closed.status == 204 else { throw BenchError("closing a session failed: \(closed.status) \(closed.body)") }
                    }
                }
            }
        } catch {
            // Say whether the bridge itself went down, with the end of what it wrote.
            guard bridge.process.isRunning else {
                throw BenchError("the bridge died during the load run (\(error)): \(bridge.output.withLockedValue { String($0.suffix(4_000)) })")
            }
            throw BenchError("\(error); the bridge is still running; its last output: \(bridge.output.withLockedValue { String($0.suffix(2_000)) })")
        }
        outcome.sessionsPerSecond = Double(plan.sessions) / (ContinuousClock.now - churnStart).seconds
        outcome.sessionsRefused = refused.withLockedValue { $0 }
        say(String(format: "load: %.0f sessions/s; settling…", outcome.sessionsPerSecond))
        guard bridge.process.isRunning else { throw BenchError("the bridge died during the load run: \(bridge.output.withLockedValue { $0 })") }

        try await Task.sleep(for: plan.settle)
        probing.withLockedValue { $0 = false }
        do {
            try await prober.value
        } catch {
            guard bridge.process.isRunning else {
                throw BenchError("the bridge died during the load run (\(error)): \(bridge.output.withLockedValue { String($0.suffix(4_000)) })")
            }
            throw error
        }
        reader.cancel()
        let open = consumers.withLockedValue { $0 }
        outcome.consumersCut = open.filter { $0.stream.snapshot.closed }.count
        outcome.eventsRead = open.reduce(0) { $0 + $1.stream.snapshot.counted }
        for consumer in open { consumer.stream.close() }
        do {
            try await forEachBounded(open.count, concurrency: 16) { i in
                _ = try await HTTP.request(port: port, .DELETE, "/v1/session", token: open[i].token)
            }
        } catch {
            let alive = bridge.process.isRunning
            throw BenchError(
                "closing the consumers' sessions failed (\(error)); the bridge is \(alive ? "running" : "gone"): \(bridge.output.withLockedValue { String($0.suffix(3_000)) })"
            )
        }
        try await Task.sleep(for: .seconds(2))
        guard bridge.process.isRunning else { throw BenchError("the bridge died after the load run: \(bridge.output.withLockedValue { $0 })") }
        outcome.rssAfterMiB = Double(bridge.rssKiB) / 1024
        outcome.seconds = (ContinuousClock.now - started).seconds
        let (latencies, peak) = samples.withLockedValue { ($0.latencies, $0.peakKiB) }
        outcome.healthSamples = latencies
        outcome.rssPeakMiB = Double(peak) / 1024
        guard outcome.rssPeakMiB <= Double(plan.memoryBoundMiB) else {
            throw BenchError(String(format: "the bridge's RSS peaked at %.0f MiB, over the bound of %d MiB", outcome.rssPeakMiB, plan.memoryBoundMiB))
        }
        return outcome
    }
}
