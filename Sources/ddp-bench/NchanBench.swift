import DDP
import DDPServer
import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1

/// The public fan-out's baseline: nchan (the nginx pub/sub module) with the public part's readers,
/// rate, count and event size. nginx runs as its own process (its memory is its own, master and
/// workers summed), the readers and the publisher in this one.
enum NchanBench {
    struct Result: FanOutRun {
        let readers: Int
        let openSeconds: Double
        let kibPerReader: Double
        /// The same growth in proportional memory (nchan's shared zone counted once).
        let pssKibPerReader: Double
        let rssBeforeKiB: Int
        let rssAfterKiB: Int
        /// Messages posted, and the time from the first to the last reply.
        let published: Int
        let publishSeconds: Double
        /// Bytes of each message's data as posted.
        let dataBytes: Int
        let delivery: ReaderCrowd.Delivery
    }

    /// The subscriber and publisher locations of `deploy/nchan/nginx.conf`.
    static let subscriberPath = "/sub"
    static let publisherPath = "/pub"

    /// Starts nginx, opens `readers` readers of the channel, measures nginx's memory growth, then
    /// posts `count` messages at `rate` (of `dataBytes` bytes, when given and larger than the
    /// messages' own shape) and counts what the readers get.
    static func run(readers: Int, rate: Int, count: Int, dataBytes: Int?) async throws -> Result {
        let nginx = try await NginxProcess.start()
        defer { nginx.stop() }
        let first = try await SSEConsumer.open(port: nginx.port, subscriberPath, token: "", counting: "changed", stampField: true)
        var crowd = ReaderCrowd(first: first)
        defer { crowd.close() }
        try await first.waitUntilOpen()
        try await Task.sleep(for: .milliseconds(300))
        let (rssBefore, pssBefore) = (nginx.rssKiB, nginx.pssKiB)
        let openStart = ContinuousClock.now
        try await crowd.grow(
            to: readers, port: nginx.port, path: subscriberPath, counting: "changed", sampleEvery: max(1, readers / 100))
        let openSeconds = (ContinuousClock.now - openStart).seconds
        try await Task.sleep(for: .milliseconds(500))
        let (rssAfter, pssAfter) = (nginx.rssKiB, nginx.pssKiB)

        let finished = NIOLockedValueBox(false)
        let start = ContinuousClock.now
        // Posting at `rate` takes count / rate seconds, unless nginx answers a post only once it has
        // handed it to its readers; either way posting and delivery are bounded by 10 minutes more.
        let publishLimit = start + .seconds(Double(count) / Double(rate) + 600)
        async let posting = publish(port: nginx.port, rate: rate, count: count, dataBytes: dataBytes, until: publishLimit, finished: finished)
        try await crowd.waitForDelivery(
            deadline: start + .seconds(Double(count) / Double(rate) + 600), expected: count, finished: { finished.withLockedValue { $0 } })
        let (published, lastReply, size) = try await posting
        let perReader = Double(max(readers - 1, 1))
        return Result(
            readers: readers, openSeconds: openSeconds, kibPerReader: Double(rssAfter - rssBefore) / perReader,
            pssKibPerReader: Double(pssAfter - pssBefore) / perReader, rssBeforeKiB: rssBefore, rssAfterKiB: rssAfter, published: published,
            publishSeconds: (lastReply - start).seconds, dataBytes: size, delivery: crowd.delivery(since: start, expected: count))
    }

    /// Posts `count` messages at `rate` to the publisher location, one after another on one
    /// kept-alive connection (a message that falls due while the previous one is answered goes out
    /// right after it, as the ticker sends a late batch), each stamped when sent. Sets `finished`
    /// however it ends; returns the messages posted, the last reply's instant and the data size.
    static func publish(
        port: Int, rate: Int, count: Int, dataBytes: Int?, until limit: ContinuousClock.Instant, finished: NIOLockedValueBox<Bool>
    ) async throws -> (Int, ContinuousClock.Instant, Int) {
        defer { finished.withLockedValue { $0 = true } }
        return try await HTTP.withConnection(port: port) { exchange in
            var previousAt: Int?
            var size = 0
            var lastReply = ContinuousClock.now
            let n = try await paced(rate: rate, count: count, until: limit) { n in
                let at = DemoDataSet.monotonicMicroseconds()
                let body = message(n: n, at: at, previousAt: previousAt, size: dataBytes)
                size = body.utf8.count
                let reply = try await exchange.send(.POST, publisherPath, body: body)
                guard (200..<300).contains(reply.status) else { throw BenchError("nchan answered a post with \(reply.status): \(reply.body)") }
                previousAt = at
                lastReply = .now
            }
            return (n, lastReply, size)
        }
    }

    /// A message shaped as the bridge's `changed` event of the ticker (`SessionEvent.documentPayload`):
    /// the change's fields first, with the stamp `at` that `SSEConsumer` reads (microseconds of
    /// `DemoDataSet.monotonicMicroseconds()`), then those fields' values before. Padded with a
    /// `pad` field to `size` bytes when that is larger.
    static func message(n: Int, at: Int, previousAt: Int?, size: Int?) -> String {
        let previous = #""n":\#(n - 1)"# + (previousAt.map { #","at":\#($0)"# } ?? "")
        let text = #"{"collection":"ticks","id":"t1","fields":{"n":\#(n),"at":\#(at)},"cleared":[],"previous":{\#(previous)}"#
        let (padOpen, padClose) = (",\"pad\":\"", "\"}")
        let padding = padOpen.utf8.count + padClose.utf8.count
        guard let size, size >= text.utf8.count + padding else { return text + "}" }
        return text + padOpen + String(repeating: "x", count: size - text.utf8.count - padding) + padClose
    }
}
