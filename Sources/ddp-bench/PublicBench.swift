import DDP
import DDPServer
import Foundation
import NIOHTTP1

/// Public fan-out (`--public-publications`): many anonymous readers of one publication, the
/// bridge as its own process (its memory is its own), the readers in this process.
enum PublicBench {
    struct Result {
        let readers: Int
        let openSeconds: Double
        let kibPerReader: Double
        /// A kept-alive HTTP connection that made one ordinary request (no stream), for comparison.
        let kibPerIdleConnection: Double
        /// Counted at the in-process DDP server: what the readers cost the Meteor app.
        let upstreamConnections: Int
        let upstreamSubscriptions: Int
        /// Events delivered to all readers, and the time from the ticker's start to the last one.
        let events: Int
        let deliverySeconds: Double
        /// Every reader saw the same number of events (each event goes to all), the last change
        /// among them, and none was cut.
        let everyReaderGotEverything: Bool
        /// Readers that got the last change before the deadline.
        let readersWithFinal: Int
        /// Milliseconds from the upstream's send to a sampled reader's receipt, sorted.
        let latencies: [Double]
        /// Bytes of one change's `data:` as the readers got it (the nchan part publishes as much).
        let eventDataBytes: Int?

        var openRate: Double { Double(readers) / openSeconds }
        var aggregate: Double { Double(events) / deliverySeconds }
    }

    /// Opens `readers` readers of `ticker [rate, count, true, startAfter]` (the changes start once
    /// everyone has had time to open), then lets the ticker run and counts what they get.
    static func run(upstream: LocalDDPServer, readers: Int, rate: Int, count: Int, startAfter: Duration) async throws -> Result {
        let bridge = try await BridgeProcess.start(
            upstream: await upstream.url,
            arguments: [
                "--public-publications", "ticker(number,integer,boolean,number)", "--public-max-readers", "1000000",
                "--public-max-readers-per-address", "1000000", "--heartbeat-interval", "600"
            ])
        defer { bridge.stop() }
        // The readiness probe's own connection is up before counting.
        let ready = ContinuousClock.now + .seconds(20)
        while try await HTTP.request(port: bridge.port, .GET, "/readyz").status != 200 {
            guard ContinuousClock.now < ready else { throw BenchError("the bridge did not get ready") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let connectionsBefore = await upstream.core.connectionCount
        let milliseconds = startAfter.wholeMilliseconds
        let path = "/v1/public/events?subscribe=ticker&params=%5B\(rate),\(count),true,\(milliseconds)%5D&collections=ticks"
        // The first reader makes the upstream connection and subscription; the ticker's clock starts.
        // Each reader notes the last change's `n` (consolidated changes arrive as fewer events).
        let final = "\"n\":\(count)"
        let first = try await SSEConsumer.open(port: bridge.port, path, token: "", counting: "changed", stampField: true, final: final)
        try await first.waitUntilOpen()
        let tickerStarts = ContinuousClock.now + startAfter
        try await Task.sleep(for: .milliseconds(300))
        let rssBefore = bridge.rssKiB
        // Latencies from a sample of readers (every reader's would be millions of samples).
        let sampleEvery = max(1, readers / 100)
        var crowd = ReaderCrowd(first: first)
        defer { crowd.close() }
        let openStart = ContinuousClock.now
        try await crowd.grow(to: readers, port: bridge.port, path: path, counting: "changed", sampleEvery: sampleEvery, final: final)
        let openSeconds = (ContinuousClock.now - openStart).seconds
        try await Task.sleep(for: .milliseconds(500))
        let rssAfter = bridge.rssKiB
        // What part of a reader is its connection: as many kept-alive connections that made one
        // ordinary request (measured after the readers, so their memory is not reused here).
        let plainCount = min(readers, 2_000)
        var plain = ReaderCrowd(first: try await SSEConsumer.open(port: bridge.port, "/v1/public/publications", token: "", counting: "-"))
        try await plain.grow(to: plainCount, port: bridge.port, path: "/v1/public/publications", counting: "-", sampleEvery: plainCount + 1)
        try await Task.sleep(for: .milliseconds(500))
        let kibPerIdleConnection = Double(bridge.rssKiB - rssAfter) / Double(plainCount)
        plain.close()
        let connections = await upstream.core.connectionCount - connectionsBefore
        let subscriptions = await upstream.core.subscriptionCount(named: "ticker")
        guard ContinuousClock.now < tickerStarts else {
            throw BenchError("opening \(readers) readers took longer than the ticker's start delay (\(startAfter)); raise it")
        }
        // Then the changes: wait until every reader has the last one, bounded.
        try await crowd.waitForDelivery(deadline: tickerStarts + .seconds(Double(count) / Double(rate) + 120), untilFinal: true)
        let delivery = crowd.delivery(since: tickerStarts)
        return Result(
            readers: readers, openSeconds: openSeconds, kibPerReader: Double(rssAfter - rssBefore) / Double(max(readers - 1, 1)),
            kibPerIdleConnection: kibPerIdleConnection,
            upstreamConnections: connections, upstreamSubscriptions: subscriptions, events: delivery.events,
            deliverySeconds: delivery.seconds, everyReaderGotEverything: delivery.everyReaderGotEverything && delivery.final == readers,
            readersWithFinal: delivery.final, latencies: delivery.latencies,
            eventDataBytes: delivery.dataBytes)
    }
}
