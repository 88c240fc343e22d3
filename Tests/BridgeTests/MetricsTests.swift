import DDP
import FaultKit
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOPosix
import Testing

@testable import Bridge

@Suite struct MetricsTests {
    /// The value of a sample line `name{labels} value` (labels given as they appear), or nil.
    /// Which version and commit is running, for dashboards and alerts across an upgrade.
    @Test func theBuildIsOneSeriesWithItsVersionAndCommit() async throws {
        try await BridgeHarness.run { h in
            let text = try await h.request(.get, "/metrics").text
            let line = text.split(separator: "\n").first { $0.hasPrefix("ddp_bridge_build_info{") }
            #expect(line?.contains(#"version="\#(BuildInfo.version)""#) == true, "\(line ?? "no ddp_bridge_build_info")")
            #expect(line?.contains(#"commit="\#(BuildInfo.commit)""#) == true && BuildInfo.commit != "", "\(line ?? "")")
            #expect(line?.hasSuffix(" 1") == true || line?.hasSuffix(" 1.0") == true)
        }
    }

    /// `--metrics-port`: the scrape and the probes on a listener of their own, and no scrape on the
    /// API's port; the listener answers nothing else.
    @Test func aMetricsPortOfItsOwnTakesTheScrapeOffTheAPIPort() async throws {
        try await BridgeHarness.run(configure: { $0.metricsListener = MetricsListener(host: "127.0.0.1", port: 0) }) { h in
            let listening = try await withTimeLimit(.seconds(10)) { await h.metricsPorts.first { _ in true } }
            let port = try #require(listening ?? nil, "the metrics listener did not listen within 10 s")
            expectError(try await h.request(.get, "/metrics"), .notFound, "not-found")
            #expect(try await h.request(.get, "/healthz").status == .ok)
            let scrape = try await Self.get(port: port, "/metrics")
            #expect(scrape.hasPrefix("HTTP/1.1 200") && scrape.contains("# HELP ddp_bridge_"), "\(scrape.prefix(300))")
            #expect(try await Self.get(port: port, "/healthz").hasPrefix("HTTP/1.1 200"))
            #expect(try await Self.get(port: port, "/readyz").hasPrefix("HTTP/1.1 200"))
            #expect(try await Self.get(port: port, "/v1/collections").hasPrefix("HTTP/1.1 404"))
        }
        let settings = try Settings(flags: ["upstream": "ws://meteor:3000/websocket", "metrics-port": "9090", "host": "0.0.0.0"], environment: [:])
        #expect(settings.configuration.metricsListener == MetricsListener(host: "0.0.0.0", port: 9090))
        #expect(throws: Settings.Invalid.self) { try Settings(flags: ["upstream": "ws://m/websocket", "metrics-host": "0.0.0.0"], environment: [:]) }
        #expect(throws: Settings.Invalid.self) { try Settings(flags: ["upstream": "ws://m/websocket", "metrics-port": "99999"], environment: [:]) }
    }

    /// One request on a connection of its own; the whole answer.
    static func get(port: Int, _ path: String) async throws -> String {
        let connection = try await RawConnection.open(port: port)
        try await connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        _ = try await connection.waitUntilClosed(within: .seconds(5))
        return await connection.received
    }

    /// Every family a running bridge exports has a `# HELP` line before its `# TYPE` line.
    @Test func everyFamilyHasItsHelpText() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            _ = try await h.request(.post, "/v1/methods/echo", token: token, body: "[1]")
            let lines = try await h.request(.get, "/metrics").text.split(separator: "\n", omittingEmptySubsequences: false)
            var families = 0
            for (index, line) in lines.enumerated() where line.hasPrefix("# TYPE ") {
                families += 1
                let name = line.dropFirst(7).prefix { $0 != " " }
                #expect(index > 0 && lines[index - 1].hasPrefix("# HELP \(name) "), "no help for \(name)")
            }
            #expect(families > 20, "\(families) families")
        }
        #expect(String(decoding: MetricsHelp.annotate(Array("# TYPE x counter\nx 1\n".utf8)), as: UTF8.self) == "# TYPE x counter\nx 1\n")
        #expect(MetricsHelp.annotate([]) == [])
    }

    @Test func metricsFollowRealTraffic() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            _ = try await h.request(.post, "/v1/methods/echo", token: token, body: "[1]")
            _ = try await h.request(.post, "/v1/methods/nope", token: token)
            let port = try #require(h.client.port)
            try await withEventStream(port: port, "/v1/events?subscribe=ticker&params=\(urlEncoded("[50,3]"))", token: token) { stream in
                // Ticks published together are consolidated into one change: wait for the last one.
                try await stream.wait("the third tick") { events in events.contains { $0.event == "changed" && $0.json["fields"]?["n"] == 3 } }
                let changes = await stream.events.filter { $0.event == "changed" }.count
                let metrics = try await h.request(.get, "/metrics")
                #expect(metrics.status == .ok)
                #expect(metrics.headers[.contentType]?.hasPrefix("text/plain") == true)
                let text = metrics.text
                #expect(metricSample(text, "ddp_bridge_sessions") == 1)
                #expect(metricSample(text, "ddp_bridge_sse_streams") == 1)
                #expect(metricSample(text, #"ddp_bridge_upstream_connections{state="connected"}"#) == 1)
                #expect(metricSample(text, "ddp_bridge_upstream_ready") == 1)
                #expect(metricSample(text, "ddp_bridge_method_duration_seconds_count") == 2)
                #expect((metricSample(text, "ddp_bridge_sse_events_delivered_total") ?? 0) >= Double(changes))
                #expect(text.contains(#"ddp_bridge_http_requests_total{route="/v1/methods/**",status="200"} 1"#), "\(text)")
                #expect(text.contains(#"ddp_bridge_http_requests_total{route="/v1/methods/**",status="404"} 1"#))
                #expect(text.contains(#"ddp_bridge_http_requests_total{route="/v1/sessions",status="201"} 1"#))
            }
        }
    }
}

/// The event loops' lateness: what says whether anything holds a loop.
@Suite struct EventLoopLatenessTests {
    /// Work that holds a loop shows in the metric: a loop kept running for 300 ms of a core's
    /// time runs its timer at least that late, and the largest lateness, the time held and the histogram say so; a loop
    /// whose thread sleeps for 300 ms (as on a lock) is as late, and that shows as blocked.
    @Test func aLoopHeldByWorkShowsInTheLatenessMetric() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        try await BridgeHarness.run(runtime: BridgeRuntime(eventLoopGroup: group)) { h in
            let before = metricSample(try await h.request(.get, "/metrics").text, "ddp_bridge_event_loop_lateness_max_seconds") ?? -1
            #expect(before >= 0 && before < 0.3, "the largest lateness before the loop was held: \(before)")
            let loop = group.next()
            // What a data-sized job that does not yield would do to the loop (the hold is the test's load).
            try await loop.submit { Self.spin(for: .milliseconds(300)) }.get()
            // The timer was due during the hold; anything due after it runs after the timer did.
            try await loop.scheduleTask(in: .milliseconds(50)) {}.futureResult.get()
            var text = try await h.request(.get, "/metrics").text
            let largest = metricSample(text, "ddp_bridge_event_loop_lateness_max_seconds") ?? 0
            #expect(largest >= 0.25 && largest < 5, "the largest lateness after a 300 ms hold: \(largest)")
            // A loop held by work, not one waiting for a core: the time held is about the lateness.
            let held = metricSample(text, "ddp_bridge_event_loop_held_max_seconds") ?? 0
            #expect(held >= 0.2 && held <= largest, "held \(held), late \(largest)")
            let ticks = metricSample(text, "ddp_bridge_event_loop_lateness_seconds_count") ?? 0
            let punctual = metricSample(text, #"ddp_bridge_event_loop_lateness_seconds_bucket{le="0.25"}"#) ?? 0
            #expect(ticks > punctual && punctual >= 0, "ticks \(ticks), within 250 ms \(punctual)")
            #expect((metricSample(text, "ddp_bridge_event_loop_blocked_max_seconds") ?? 1) < 0.2)

            // The loop's thread asleep, not running: as late, but blocked rather than held.
            try await loop.submit { usleep(300_000) }.get()
            try await loop.scheduleTask(in: .milliseconds(50)) {}.futureResult.get()
            text = try await h.request(.get, "/metrics").text
            let blocked = metricSample(text, "ddp_bridge_event_loop_blocked_max_seconds") ?? 0
            #expect(blocked >= 0.2 && blocked < 5, "blocked \(blocked)")
            #expect((metricSample(text, "ddp_bridge_event_loop_held_max_seconds") ?? 1) == held, "the sleep added nothing held")
        }
        try await group.shutdownGracefully()
    }

    /// Keeps the calling thread running (not asleep) until it has had `duration` of a core's
    /// time (what it waits for a core meanwhile, on a machine busy with other tests, does not
    /// count), or 10 s have passed.
    private static func spin(for duration: Duration) {
        func cpuTime() -> Duration {
            var time = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
            return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
        }
        let (end, giveUp) = (cpuTime() + duration, ContinuousClock.now + .seconds(10))
        while cpuTime() < end && ContinuousClock.now < giveUp {}
    }

    @Test func latenessIsHowFarPastItsDueTimeATickRan() {
        let due = NIODeadline.uptimeNanoseconds(1_000_000_000)
        #expect(EventLoopLateness.lateness(due: due, now: due + .milliseconds(7)) == .milliseconds(7))
        #expect(EventLoopLateness.lateness(due: due, now: due - .milliseconds(1)) == .zero)
    }

    /// What the loop's thread spent waiting for a core is the machine's; of the rest, no more than
    /// the thread ran is the loop's work, and what is left it spent off any core.
    @Test func aTicksLatenessSplitsIntoWaitingRunningAndBlocked() {
        typealias Split = EventLoopLateness.Split
        func split(_ late: Int64, waited: Int64, ran: Int64) -> Split {
            EventLoopLateness.split(late: .milliseconds(late), waited: .milliseconds(waited), ran: .milliseconds(ran))
        }
        #expect(split(80, waited: 70, ran: 100) == Split(waited: .milliseconds(70), held: .milliseconds(10), blocked: .zero))
        #expect(split(20, waited: 30, ran: 5) == Split(waited: .milliseconds(20), held: .zero, blocked: .zero))
        #expect(split(80, waited: 0, ran: 15) == Split(waited: .zero, held: .milliseconds(15), blocked: .milliseconds(65)))
        #expect(split(80, waited: 10, ran: 0) == Split(waited: .milliseconds(10), held: .zero, blocked: .milliseconds(70)))
        #expect(split(0, waited: 3, ran: 3) == Split(waited: .zero, held: .zero, blocked: .zero))
        // Counters read out of order never make a part negative.
        #expect(split(40, waited: -5, ran: -5) == Split(waited: .zero, held: .zero, blocked: .milliseconds(40)))
    }
}
