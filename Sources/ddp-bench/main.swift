import DDP
import DDPServer
import Foundation
import NIOHTTP1

// The benchmark harness (`ddp-bench --help` says how to run it). Each part gets fresh servers;
// a part that fails is reported and the others still run; the exit status says whether all ran.

// The raw broadcaster's own process (the broadcaster part starts it).
if CommandLine.arguments.dropFirst().first == RawBroadcaster.serveArgument {
    do {
        try await RawBroadcaster.serve()
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("ddp-bench: the raw broadcaster failed: \(error)\n".utf8))
        exit(1)
    }
}

// Read on the first thread, before any other exists: the priority every measurement runs at.
_ = Priority.reference

let options: BenchOptions
do {
    options = try BenchOptions(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("ddp-bench: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}
if options.help {
    print(BenchOptions.usage)
    exit(0)
}
let smoke = options.smoke
let outputDirectory = options.outputDirectory
let parts = options.parts
let runs = smoke ? 1 : 3
if options.replot {
    try Report.replot(outputDirectory)
    exit(0)
}
let previous = Report.previous(outputDirectory)

var figures: [Figure] = []
var targets: [Target] = []
/// Progress goes to standard error, unbuffered, so a failing run shows how far it got.
func say(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }
var failures: [String] = []
/// Runs one part when it was asked for; a part that fails is reported, and the next one runs.
@MainActor func part(_ name: String, _ body: @MainActor () async throws -> Void) async {
    guard parts.contains(name) else { return }
    Priority.levelOwn()
    if !smoke { say(await HarnessLoad.sample(over: .seconds(1)).description) }
    do {
        try await body()
    } catch {
        say("the \(name) part failed: \(error)")
        failures.append("\(name): \(error)")
    }
}

await part("micro") {
    say("micro-benchmarks…")
    figures += try Micro.run(secondsPerRun: smoke ? 0.02 : 0.3, runs: smoke ? 1 : 5)
}

// Each part gets a fresh upstream server and bridge, so what one part leaves behind
// (documents, closing connections) does not disturb the next one's figures.
var upstream = try await startUpstream()
var upstreamURL = await upstream.url
var bridge = try await startBridge(upstream: upstreamURL)
@MainActor func freshServers() async throws {
    await bridge.stop()
    await upstream.stop()
    upstream = try await startUpstream()
    upstreamURL = await upstream.url
    bridge = try await startBridge(upstream: upstreamURL)
}

await part("sse") {
    let count = smoke ? 2_000 : 100_000
    let fanCount = smoke ? 200 : 20_000
    let fanConsumers = smoke ? 10 : 100
    say("SSE throughput: bulk of \(count) documents, raw WebSocket vs the bridge, \(runs) runs…")
    var raw: [Double] = []
    var client: [Double] = []
    var one: [Double] = []
    var fan: [Double] = []
    for _ in 0..<runs {
        raw.append(try await SSEBench.rawBulkRate(url: upstreamURL, count: count))
        client.append(try await SSEBench.clientBulkRate(url: upstreamURL, count: count))
        one.append(try await SSEBench.bridgeBulkRate(bridgePort: bridge.port, count: count, consumers: 1))
        fan.append(try await SSEBench.bridgeBulkRate(bridgePort: bridge.port, count: fanCount, consumers: fanConsumers))
    }
    let rawRate = Stats.median(raw)
    figures.append(Figure("sse", "raw WebSocket frames received (baseline)", rawRate, "events/s"))
    figures.append(
        Figure(
            "sse", "project's DDP client (parse + cache)", Stats.median(client), "events/s",
            baseline: "raw WebSocket", baselineValue: rawRate))
    figures.append(
        Figure(
            "sse", "SSE, 1 consumer", Stats.median(one), "events/s",
            baseline: "project's DDP client", baselineValue: Stats.median(client)))
    figures.append(
        Figure(
            "sse", "SSE, \(fanConsumers) consumers of one session (aggregate)", Stats.median(fan), "events/s",
            note: "\(fanCount) documents to each consumer"))
    let ratio = Stats.median(one) / Stats.median(client)
    targets.append(.ratio("SSE to 1 consumer vs the project's DDP client ingest", ratio, atLeast: 0.90))
    targets.append(
        Target(
            name: "\(fanConsumers) consumers of one session, aggregate", goal: "≥ 1,000,000 events/s",
            measured: "\(Report.number(Stats.median(fan))) events/s", score: Stats.median(fan) / 1_000_000))
}

await part("latency") {
    try await freshServers()
    for rate in [1_000, 10_000] {
        let count = smoke ? rate / 10 : rate * 3
        say("SSE latency at \(rate) changes/s (\(count) changes), \(runs) runs each…")
        // Alternating runs; each percentile is the median over the runs (single runs are noisy here).
        var raw: [[Double]] = []
        var through: [[Double]] = []
        for _ in 0..<runs {
            raw.append(try await SSEBench.rawTickerLatencies(url: upstreamURL, rate: rate, count: count).sorted())
            through.append(try await SSEBench.bridgeTickerLatencies(bridgePort: bridge.port, rate: rate, count: count).sorted())
        }
        func percentile(_ runs: [[Double]], _ p: Double) -> Double { Stats.median(runs.map { Stats.percentile($0, p) }) / 1000 }
        for (name, samples) in [("raw WebSocket", raw), ("through the bridge (SSE)", through)] {
            for p in [50.0, 99.0, 99.9] {
                figures.append(
                    Figure(
                        "latency", "\(rate)/s \(name) p\(p == 99.9 ? "99.9" : String(Int(p)))", percentile(samples, p), "ms",
                        note: "\(samples.map(\.count).reduce(0, +)) samples in \(runs) runs"))
            }
        }
        let added = percentile(through, 99) - percentile(raw, 99)
        figures.append(Figure("latency", "\(rate)/s p99 added by the bridge", added, "ms", note: "bridge p99 − raw p99"))
        targets.append(
            Target(
                name: "p99 latency added at \(Report.number(Double(rate))) changes/s", goal: "≤ 1 ms",
                measured: String(format: "%.2f ms (bridge p99 %.2f ms)", added, percentile(through, 99)),
                score: 1 / max(added, 0.01)))
    }
}

await part("rest") {
    try await freshServers()
    let seconds = smoke ? 1.0 : 8.0
    say("REST with wrk (\(RESTBench.threads) threads, \(RESTBench.connections) connections, \(Int(seconds)) s per run)…")
    let token = try await HTTP.session(port: bridge.port, login: #"{"username":"alice","password":"secret"}"#)
    for body in [#"{"name":"tasks"}"#, #"{"name":"bulk","params":[1000],"timeout":60000}"#] {
        let reply = try await HTTP.request(port: bridge.port, .POST, "/v1/subscriptions", token: token, body: body)
        guard reply.status == 201 || reply.status == 200 else { throw BenchError("subscribe failed: \(reply.body)") }
    }
    let docPath = "/v1/collections/tasks/task-a1"
    let document = try await HTTP.request(port: bridge.port, .GET, docPath, token: token)
    let bare = try await RESTBench.bareServer(path: docPath, body: document.body)
    let script = FileManager.default.temporaryDirectory.appendingPathComponent("ddp-bench-post.lua").path
    try #"wrk.method = "POST"; wrk.body = '["x"]'; wrk.headers["Content-Type"] = "application/json""#.write(
        toFile: script, atomically: true, encoding: .utf8)
    var bareRuns: [RESTBench.Load] = []
    var docRuns: [RESTBench.Load] = []
    var queryRuns: [RESTBench.Load] = []
    var methodRuns: [RESTBench.Load] = []
    var directRuns: [RESTBench.Load] = []
    let query = "/v1/collections/bulk?selector=%7B%22group%22%3A%22g3%22%7D&limit=1000"
    for _ in 0..<runs {
        bareRuns.append(try RESTBench.wrk("http://127.0.0.1:\(bare.port)\(docPath)", seconds: seconds))
        docRuns.append(try RESTBench.wrk("http://127.0.0.1:\(bridge.port)\(docPath)", seconds: seconds, token: token))
        queryRuns.append(try RESTBench.wrk("http://127.0.0.1:\(bridge.port)\(query)", seconds: seconds, token: token))
        directRuns.append(try await RESTBench.directCalls(url: upstreamURL, seconds: seconds, workers: RESTBench.connections))
        methodRuns.append(try RESTBench.wrk("http://127.0.0.1:\(bridge.port)/v1/methods/echo", seconds: seconds, token: token, script: script))
    }
    await bare.stop()
    func medianLoad(_ loads: [RESTBench.Load]) -> RESTBench.Load {
        RESTBench.Load(
            requestsPerSecond: Stats.median(loads.map(\.requestsPerSecond)), p50: Stats.median(loads.map(\.p50)), p99: Stats.median(loads.map(\.p99)))
    }
    let rows: [(String, RESTBench.Load, String?, RESTBench.Load?)] = [
        ("bare Hummingbird route, same bytes (HTTP ceiling)", medianLoad(bareRuns), nil, nil),
        ("GET one cached document", medianLoad(docRuns), "bare route", medianLoad(bareRuns)),
        ("GET selector query over 1,000 documents (100 match)", medianLoad(queryRuns), "bare route", medianLoad(bareRuns)),
        ("direct DDP method calls, one connection (upstream ceiling)", medianLoad(directRuns), nil, nil),
        ("POST method call", medianLoad(methodRuns), "direct DDP calls", medianLoad(directRuns))
    ]
    for (name, load, baselineName, baseline) in rows {
        figures.append(
            Figure(
                "rest", name, load.requestsPerSecond, "req/s", baseline: baselineName, baselineValue: baseline?.requestsPerSecond,
                note: String(format: "p50 %.2f ms, p99 %.2f ms", load.p50, load.p99)))
    }
    let bareRate = medianLoad(bareRuns).requestsPerSecond
    let directRate = medianLoad(directRuns).requestsPerSecond
    // On 2 cores a call through the bridge costs at least an HTTP request plus a DDP call.
    let composed = 1 / (1 / bareRate + 1 / directRate)
    figures.append(Figure("rest", "composed ceiling 1 / (1/bare + 1/direct)", composed, "req/s"))
    let docRatio = medianLoad(docRuns).requestsPerSecond / bareRate
    let queryRatio = medianLoad(queryRuns).requestsPerSecond / bareRate
    let methodRatio = medianLoad(methodRuns).requestsPerSecond / composed
    targets.append(.ratio("GET one cached document vs bare Hummingbird route", docRatio, atLeast: 0.85))
    targets.append(.ratio("GET selector query (1,000 documents, 100 match) vs bare route", queryRatio, atLeast: 0.25, decimals: 1))
    targets.append(.ratio("POST method call vs composed ceiling", methodRatio, atLeast: 0.85))
}

await bridge.stop()

await part("sessions") {
    await upstream.stop()
    upstream = try await startUpstream()
    upstreamURL = await upstream.url
    for count in smoke ? [20] : (options.sessions.map { [$0] } ?? [1_000, 5_000]) {
        say("sessions: \(count), each with a subscription and an open stream (the bridge as its own process)…")
        let result = try await SessionsBench.run(upstream: upstreamURL, sessions: count)
        figures.append(
            Figure(
                "sessions", "\(count) sessions: memory per session", result.kibPerSession, "KiB",
                note: "RSS \(result.rssBeforeKiB / 1024) → \(result.rssAfterKiB / 1024) MiB"))
        figures.append(
            Figure(
                "sessions", "\(count) sessions: time to open", result.secondsToOpen, "s",
                note: String(format: "%.0f sessions/s (32 at a time)", Double(count) / result.secondsToOpen)))
        if count == 5_000 || smoke {
            let perSecond = Double(count) / result.secondsToOpen
            targets.append(
                Target(
                    name: "memory per idle session (sub + stream), \(count) sessions", goal: "≤ 32 KiB",
                    measured: String(format: "%.1f KiB", result.kibPerSession), score: 32 / max(result.kibPerSession, 0.1)))
            targets.append(
                Target(
                    name: "opening sessions (sub + stream), \(count) sessions", goal: "≥ 1,500/s",
                    measured: String(format: "%.0f/s", perSecond), score: perSecond / 1_500))
        }
    }
}

await part("recovery") {
    let count = smoke ? 200 : (options.recoverySessions ?? 10_000)
    let rate = 1_000.0
    let away = smoke ? 2 : 6
    say("recovery: \(count) sessions, the upstream away \(away) s, back at --reconnect-rate \(Int(rate))…")
    let result = try await RecoveryBench.run(sessions: count, rate: rate, away: .seconds(away))
    figures.append(
        Figure(
            "recovery", "\(count) sessions: all back after the upstream's return", result.secondsBack, "s",
            note: String(format: "away %.0f s; bound N / rate + 2 = %.1f s", result.awaySeconds, result.bound)))
    targets.append(
        Target(
            name: "sessions back after the upstream returns, \(count) sessions", goal: String(format: "≤ %.1f s (N / rate + 2 s)", result.bound),
            measured: String(format: "%.2f s", result.secondsBack), score: result.bound / max(result.secondsBack, 0.001)))
}

await part("load") {
    await upstream.stop()
    upstream = try await startUpstream()
    upstreamURL = await upstream.url
    let plan = LoadRun.Plan(
        sessions: options.loadSessions ?? (smoke ? 1_000 : 10_000),
        slowConsumers: options.loadConsumers ?? (smoke ? 20 : 200),
        tickRate: options.loadRate ?? 50,
        settle: .seconds(smoke ? 2 : 10),
        memoryBoundMiB: options.loadBoundMiB ?? 512,
        niceGenerator: !options.loadSamePriority)
    let outcome = try await LoadRun.run(upstream: upstreamURL, plan: plan)
    let health = outcome.healthSamples.sorted()
    let over = health.filter { $0 > 100 }.count
    let setting =
        "\(plan.sessions) sessions opened and closed, \(plan.slowConsumers) slow consumers of \(plan.tickRate) changes/s each"
        + (plan.niceGenerator ? "; load generator at nice 10" : "; load generator at the bridge's priority")
    figures.append(Figure("load", "/healthz p50 under load", Stats.percentile(health, 50), "ms", note: setting))
    figures.append(Figure("load", "/healthz p99 under load", Stats.percentile(health, 99), "ms", note: "\(health.count) probes, every 25 ms"))
    figures.append(Figure("load", "/healthz slowest under load", health.max() ?? 0, "ms", note: "\(over) of \(health.count) over 100 ms"))
    figures.append(
        Figure(
            "load", "sessions opened and closed per second", outcome.sessionsPerSecond, "sessions/s",
            note: "32 clients on kept-alive connections; \(outcome.sessionsRefused) creations answered 503 and retried")
    )
    figures.append(
        Figure(
            "load", "bridge RSS at peak", outcome.rssPeakMiB, "MiB",
            note: String(
                format: "before %.0f MiB, after closing %.0f MiB; bound %d MiB", outcome.rssBeforeMiB, outcome.rssAfterMiB, plan.memoryBoundMiB)))
    figures.append(
        Figure(
            "load", "slow consumers cut off", Double(outcome.consumersCut), "streams",
            note: String(format: "%d events read by them in %.0f s", outcome.eventsRead, outcome.seconds)))
    let slowest = health.max() ?? 0
    targets.append(
        Target(
            name: "sessions opened and closed in one run", goal: "10,000",
            measured: Report.number(Double(plan.sessions)), score: Double(plan.sessions) / 10_000))
    targets.append(
        Target(
            name: "/healthz under load (slowest of \(health.count))", goal: "≤ 100 ms",
            measured: String(format: "%.1f ms", slowest), score: 100 / max(slowest, 0.1)))
    targets.append(
        Target(
            name: "bridge RSS under load (peak)", goal: "≤ \(plan.memoryBoundMiB) MiB",
            measured: String(format: "%.0f MiB", outcome.rssPeakMiB), score: Double(plan.memoryBoundMiB) / max(outcome.rssPeakMiB, 1)))
}

// The public part and its baseline, nchan, share readers, rate and count; nchan's targets put the
// public part's result (kept here) beside its own.
let publicReaders = options.publicReaders ?? (smoke ? 200 : 10_000)
let publicRate = smoke ? 100 : 1_000
let publicCount = options.publicChanges ?? (smoke ? 100 : 3_000)
let publicLatencyRate = options.publicLatencyRate ?? (smoke ? 20 : 100)
var publicResult: PublicBench.Result?
/// The public part's run at `publicLatencyRate`, for the broadcaster's comparison.
var publicSlowResult: PublicBench.Result?
let publicSlowCount = smoke ? 50 : publicLatencyRate * 10

await part("public") {
    await upstream.stop()
    upstream = try await startUpstream()
    upstreamURL = await upstream.url
    let (readers, rate, count) = (publicReaders, publicRate, publicCount)
    say("public fan-out: \(readers) readers of one publication, ticker at \(rate) changes/s (the bridge as its own process)…")
    let raw = try await SSEBench.rawTickerLatencies(url: upstreamURL, rate: rate, count: count).sorted().map { $0 / 1000 }
    let result = try await PublicBench.run(
        upstream: upstream, readers: readers, rate: rate, count: count, startAfter: .seconds(smoke ? 5 : 30))
    publicResult = result
    let openRate = Double(readers) / result.openSeconds
    let aggregate = Double(result.events) / result.deliverySeconds
    let added = Stats.percentile(result.latencies, 99) - Stats.percentile(raw, 99)
    let setting = "\(readers) readers of ticker [\(rate)/s, \(count)]"
    figures.append(Figure("public", "opening public readers", openRate, "readers/s", note: setting))
    figures.append(Figure("public", "memory per idle public reader", result.kibPerReader, "KiB", note: "RSS growth over \(readers - 1) readers"))
    figures.append(
        Figure(
            "public", "memory per idle kept-alive connection (no stream)", result.kibPerIdleConnection, "KiB",
            note: "RSS growth over \(min(readers, 2_000)) connections that made one ordinary request"))
    figures.append(
        Figure(
            "public", "upstream connections for all readers", Double(result.upstreamConnections), "connections",
            note: "\(result.upstreamSubscriptions) upstream subscription(s), counted at the DDP server"))
    figures.append(
        Figure(
            "public", "aggregate delivery to all readers", aggregate, "events/s",
            note:
                "\(result.events) events in \(String(format: "%.1f", result.deliverySeconds)) s; \(result.readersWithFinal) of \(result.readers) readers "
                + "got the last change; every reader got every event: \(result.everyReaderGotEverything)"
        ))
    // The pipeline folds the changes to one document that queue while the loops write (a
    // consumer may miss time, never state): the changes that reached every reader, per second.
    figures.append(
        Figure(
            "public", "changes brought to all readers", result.deliverySeconds > 0 ? Double(readers) * Double(count) / result.deliverySeconds : 0,
            "changes/s",
            note:
                "\(readers) readers × \(count) changes in \(String(format: "%.1f", result.deliverySeconds)) s, as \(result.events / max(readers, 1)) events per reader; "
                + "every reader got the last change: \(result.readersWithFinal == readers)"))
    for p in [50.0, 99.0] {
        figures.append(
            Figure(
                "public", "latency p\(Int(p)), sampled readers", Stats.percentile(result.latencies, p), "ms",
                note: "\(result.latencies.count) samples; raw WebSocket p\(Int(p)) \(String(format: "%.2f", Stats.percentile(raw, p))) ms"))
    }
    // Latency at a rate the readers can take: 100 changes/s to every reader (1,000,000 events/s
    // offered to 10,000), in a run of its own, against the raw WebSocket reader at that rate.
    let (slowRate, slowCount) = (publicLatencyRate, publicSlowCount)
    let slowRaw = try await SSEBench.rawTickerLatencies(url: upstreamURL, rate: slowRate, count: slowCount).sorted().map { $0 / 1000 }
    let slow = try await PublicBench.run(
        upstream: upstream, readers: readers, rate: slowRate, count: slowCount, startAfter: .seconds(smoke ? 5 : 30))
    publicSlowResult = slow
    let slowAdded = Stats.percentile(slow.latencies, 99) - Stats.percentile(slowRaw, 99)
    for p in [50.0, 99.0] {
        figures.append(
            Figure(
                "public", "latency p\(Int(p)) at \(slowRate) changes/s, sampled readers", Stats.percentile(slow.latencies, p), "ms",
                note:
                    "\(slow.latencies.count) samples; raw WebSocket p\(Int(p)) \(String(format: "%.2f", Stats.percentile(slowRaw, p))) ms; every reader got every event: \(slow.everyReaderGotEverything)"
            ))
    }
    targets.append(
        Target(
            name: "p99 latency added at \(Report.number(Double(slowRate))) changes/s to \(Report.number(Double(readers))) public readers",
            goal: "≤ 50 ms, no reader cut",
            measured: String(format: "%.1f ms%@", slowAdded, slow.everyReaderGotEverything ? "" : "; NOT every reader got every event"),
            score: slow.everyReaderGotEverything ? 50 / max(slowAdded, 0.01) : 0))
    targets.append(
        Target(
            name: "\(Report.number(Double(readers))) public readers: upstream connections and subscriptions",
            goal: "1 and 1, every reader gets every change",
            measured:
                "\(result.upstreamConnections) and \(result.upstreamSubscriptions); \(result.everyReaderGotEverything ? "all" : "NOT all") readers complete",
            score: result.upstreamConnections == 1 && result.upstreamSubscriptions == 1 && result.everyReaderGotEverything ? 1 : 0))
    targets.append(
        Target(
            name: "memory per idle public reader", goal: "≤ 8 KiB", measured: String(format: "%.1f KiB", result.kibPerReader),
            score: 8 / max(result.kibPerReader, 0.1)))
    targets.append(
        Target(
            name: "aggregate delivery to \(Report.number(Double(readers))) public readers", goal: "≥ 2,000,000 events/s",
            measured: "\(Report.number(aggregate)) events/s", score: aggregate / 2_000_000))
    targets.append(
        Target(
            name: "p99 latency added at \(Report.number(Double(rate))) changes/s to all public readers", goal: "≤ 10 ms",
            measured: String(format: "%.1f ms", added), score: 10 / max(added, 0.01)))
    targets.append(
        Target(
            name: "opening \(Report.number(Double(readers))) public readers", goal: "≥ 5,000/s", measured: String(format: "%.0f/s", openRate),
            score: openRate / 5_000))
}

await upstream.stop()

// The ceiling for the public part: a minimal SwiftNIO broadcaster with the same readers, rates,
// counts, event size and sampling, in this run.
await part("broadcaster") {
    say(
        "raw broadcaster baseline: \(publicReaders) readers, \(publicCount) changes at \(publicRate)/s, then \(publicSlowCount) at \(publicLatencyRate)/s…"
    )
    let size = publicResult?.eventDataBytes
    let fast = try await RawBroadcaster.run(readers: publicReaders, rate: publicRate, count: publicCount, dataBytes: size)
    let slow = try await RawBroadcaster.run(readers: publicReaders, rate: publicLatencyRate, count: publicSlowCount, dataBytes: size)
    figures += RawBroadcaster.figures(fast: fast, slow: slow, rates: (publicRate, publicLatencyRate), bridge: (publicResult, publicSlowResult))
    targets.append(RawBroadcaster.latencyTarget(broadcaster: slow, bridge: publicSlowResult, rate: publicLatencyRate, readers: publicReaders))
}

var nchanResult: NchanBench.Result?
await part("nchan") {
    say("nchan baseline: \(publicReaders) readers of one channel, \(publicCount) messages posted at \(publicRate)/s (nginx as its own process)…")
    if let reason = NginxProcess.unavailable() {
        figures.append(Figure("nchan", "nchan baseline", 0, "not measured", note: reason))
        targets += NchanBench.comparison(bridge: publicResult, nchan: nil, readers: publicReaders, count: publicCount, missing: reason)
        // The test command's smoke run must not need nginx; bench.sh installs it.
        if smoke {
            say("nchan: skipped in the smoke run: \(reason)")
            return
        }
        throw BenchError("nchan cannot run: \(reason) (scripts/bench.sh installs nginx and libnginx-mod-nchan)")
    }
    let result: NchanBench.Result
    do {
        result = try await NchanBench.run(readers: publicReaders, rate: publicRate, count: publicCount, dataBytes: publicResult?.eventDataBytes)
    } catch {
        figures.append(Figure("nchan", "nchan baseline", 0, "not measured", note: "\(error)"))
        targets += NchanBench.comparison(
            bridge: publicResult, nchan: nil, readers: publicReaders, count: publicCount, missing: "nchan failed: \(error)")
        throw error
    }
    figures += NchanBench.figures(result, rate: publicRate, count: publicCount, bridge: publicResult)
    targets += NchanBench.comparison(bridge: publicResult, nchan: result, readers: publicReaders, count: publicCount, missing: nil)
    nchanResult = result
}

// The bridge at the rate nchan achieved (its posts are serial: about a dozen a second here), with
// the same readers, so the two latencies compare at one rate.
await part("nchan") {
    guard let nchan = nchanResult, nchan.publishSeconds > 0 else { return }
    // Checked: a run too short to time gives no rate to convert.
    guard let achieved = Int(exactly: (Double(nchan.published) / nchan.publishSeconds).rounded()) else { return }
    let rate = min(max(1, achieved), publicRate)
    let count = smoke ? 20 : rate * 30
    say("the bridge at nchan's achieved rate: \(publicReaders) readers, \(count) changes at \(rate)/s…")
    upstream = try await startUpstream()
    let bridge: PublicBench.Result
    do {
        bridge = try await PublicBench.run(upstream: upstream, readers: publicReaders, rate: rate, count: count, startAfter: .seconds(smoke ? 5 : 30))
    } catch {
        await upstream.stop()
        throw error
    }
    await upstream.stop()
    figures += NchanBench.sameRateFigures(bridge: bridge, nchan: nchan, rate: rate)
    targets.append(NchanBench.sameRateTarget(bridge: bridge, nchan: nchan, rate: rate))
}

try Report.write(figures: figures, targets: targets, smoke: smoke, to: outputDirectory)
print(try String(contentsOfFile: outputDirectory + "/results.md", encoding: .utf8))
if let previous { print(Report.comparison(previous, figures)) }
if !failures.isEmpty {
    say("\(failures.count) part(s) failed:\n" + failures.joined(separator: "\n"))
    exit(1)
}
