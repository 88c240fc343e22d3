import DDP
import DDPClient
import DDPServer
import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1
import NIOWebSocket
import WSClient

/// SSE throughput and latency, each against the same upstream read directly in the same run.
enum SSEBench {
    // MARK: - Baselines read straight off the upstream

    /// A raw WebSocket reader: subscribes to `bulk [n]` and counts frames until `ready`
    /// (no parsing beyond a prefix check). Returns added documents per second.
    static func rawBulkRate(url: String, count: Int) async throws -> Double {
        let result = NIOLockedValueBox<(count: Int, seconds: Double)?>(nil)
        try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 1 << 24), logger: quietLogger) { inbound, outbound, _ in
            try await outbound.write(.text(#"{"msg":"connect","version":"1","support":["1"]}"#))
            var start = ContinuousClock.now
            var added = 0
            for try await message in inbound.messages(maxSize: 1 << 24) {
                guard case .text(let text) = message else { continue }
                if text.hasPrefix(#"{"msg":"added""#) {
                    added += 1
                } else if text.hasPrefix(#"{"msg":"connected""#) {
                    start = .now
                    try await outbound.write(.text(#"{"msg":"sub","id":"bench","name":"bulk","params":[\#(count)]}"#))
                } else if text.hasPrefix(#"{"msg":"ready""#) {
                    result.withLockedValue { $0 = (added, (ContinuousClock.now - start).seconds) }
                    break
                } else if text.hasPrefix(#"{"msg":"ping""#) {
                    try await outbound.write(.text(#"{"msg":"pong"}"#))
                }
            }
            try? await outbound.close(.normalClosure, reason: nil)
        }
        guard let (added, seconds) = result.withLockedValue({ $0 }), added == count else {
            throw BenchError("the raw reader did not see \(count) documents")
        }
        return Double(added) / seconds
    }

    /// The project's own DDP client: subscribe to `bulk [n]` and wait for `ready` (parsing every
    /// message and filling its document cache).
    static func clientBulkRate(url: String, count: Int) async throws -> Double {
        let (client, runner) = try await connectedClient(url: url)
        defer { runner.cancel() }
        let start = ContinuousClock.now
        _ = try await client.subscribe("bulk", params: [.int(count)], timeout: .seconds(120))
        let seconds = (ContinuousClock.now - start).seconds
        await client.close()
        return Double(count) / seconds
    }

    /// A raw WebSocket reader of `ticker [rate, count, true]`: microseconds from each change's
    /// stamp to its arrival.
    static func rawTickerLatencies(url: String, rate: Int, count: Int) async throws -> [Double] {
        let samples = NIOLockedValueBox<[Double]>([])
        try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 1 << 24), logger: quietLogger) { inbound, outbound, _ in
            try await outbound.write(.text(#"{"msg":"connect","version":"1","support":["1"]}"#))
            var seen = 0
            for try await message in inbound.messages(maxSize: 1 << 24) {
                guard case .text(let text) = message else { continue }
                if text.hasPrefix(#"{"msg":"changed""#) {
                    if let at = SSEHandler.stampValue(Array(text.utf8)) {
                        let latency = Double(DemoDataSet.monotonicMicroseconds() - at)
                        samples.withLockedValue { $0.append(latency) }
                    }
                    seen += 1
                    if seen >= count { break }
                } else if text.hasPrefix(#"{"msg":"connected""#) {
                    try await outbound.write(.text(#"{"msg":"sub","id":"lat","name":"ticker","params":[\#(rate),\#(count),true]}"#))
                } else if text.hasPrefix(#"{"msg":"ping""#) {
                    try await outbound.write(.text(#"{"msg":"pong"}"#))
                }
            }
            try? await outbound.close(.normalClosure, reason: nil)
        }
        return samples.withLockedValue { $0 }
    }

    // MARK: - Through the bridge

    /// `consumers` streams of one session, then `bulk [n]` subscribed: events per second
    /// delivered in all (from the subscribe call to the last consumer's last event).
    static func bridgeBulkRate(bridgePort: Int, count: Int, consumers: Int) async throws -> Double {
        let token = try await HTTP.session(port: bridgePort)
        var streams: [SSEConsumer] = []
        for _ in 0..<consumers {
            streams.append(try await SSEConsumer.open(port: bridgePort, "/v1/events?collections=bulk", token: token, counting: "added"))
        }
        defer { for stream in streams { stream.close() } }
        for stream in streams { try await stream.waitUntilOpen() }
        let start = ContinuousClock.now
        let reply = try await HTTP.request(
            port: bridgePort, .POST, "/v1/subscriptions", token: token,
            body: #"{"name":"bulk","params":[\#(count)],"wait":false,"timeout":120000}"#)
        guard reply.status == 201 || reply.status == 200 else { throw BenchError("subscribe failed: \(reply.status) \(reply.body)") }
        let deadline = ContinuousClock.now + .seconds(180)
        while streams.contains(where: { $0.snapshot.counted < count }) {
            guard ContinuousClock.now < deadline else {
                throw BenchError("streams saw \(streams.map { $0.snapshot.counted }.min() ?? 0) of \(count) documents")
            }
            if let closed = streams.first(where: { $0.snapshot.closed }) {
                throw BenchError("a stream closed early after \(closed.snapshot.counted) documents")
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        let end = streams.compactMap { $0.snapshot.lastCounted }.max() ?? .now
        _ = try? await HTTP.request(port: bridgePort, .DELETE, "/v1/session", token: token)
        return Double(count * consumers) / (end - start).seconds
    }

    /// One stream following `ticker [rate, count, true]`: microseconds from each change's stamp
    /// (when the upstream sent it) to the consumer's receipt of the event carrying it.
    static func bridgeTickerLatencies(bridgePort: Int, rate: Int, count: Int) async throws -> [Double] {
        let token = try await HTTP.session(port: bridgePort)
        let stream = try await SSEConsumer.open(port: bridgePort, "/v1/events?collections=ticks", token: token, counting: "changed", stampField: true)
        defer { stream.close() }
        try await stream.waitUntilOpen()
        let reply = try await HTTP.request(
            port: bridgePort, .POST, "/v1/subscriptions", token: token,
            body: #"{"name":"ticker","params":[\#(rate),\#(count),true],"wait":false}"#)
        guard reply.status == 201 || reply.status == 200 else { throw BenchError("subscribe failed: \(reply.status) \(reply.body)") }
        // Changes may be consolidated into fewer events; wait for the last one (its `n` is `count`).
        let deadline = ContinuousClock.now + .seconds(Double(count) / Double(rate) + 30)
        var quietSince = ContinuousClock.now
        var last = 0
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            let seen = stream.snapshot.counted
            if seen != last {
                last = seen
                quietSince = .now
            }
            if seen > 0, ContinuousClock.now - quietSince > .milliseconds(500) { break }
        }
        _ = try? await HTTP.request(port: bridgePort, .DELETE, "/v1/session", token: token)
        return stream.snapshot.latencies
    }
}
