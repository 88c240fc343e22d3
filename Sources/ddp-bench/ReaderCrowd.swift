import DDP
import Foundation

/// Many readers of one event stream in this process (the public and nchan parts): opened in
/// batches, counted together, closed together.
struct ReaderCrowd {
    /// What the readers got, from the instant the changes started.
    struct Delivery {
        /// Events counted by all readers together.
        let events: Int
        /// From the start to the last event's arrival at any reader.
        let seconds: Double
        /// How many events each reader counted (one value when all got the same).
        let perReader: Set<Int>
        /// Readers that counted exactly `expected` events (every reader when nothing was expected).
        let complete: Int
        /// Streams that ended (closed by the server or cut) before the count was taken.
        let closed: Int
        /// Readers that got the last change (its mark, when the readers look for one).
        let final: Int
        /// Milliseconds from the stamp to a sampled reader's receipt, sorted.
        let latencies: [Double]
        /// Bytes of a counted event's `data:` at a sampled reader.
        let dataBytes: Int?

        /// Every reader saw the same number of events (each event goes to all), none was cut.
        var everyReaderGotEverything: Bool { perReader.count == 1 && (perReader.first ?? 0) > 0 && closed == 0 }
    }

    private(set) var readers: [SSEConsumer]

    init(first: SSEConsumer) { readers = [first] }

    /// Opens readers of `GET path` until there are `total`, `batch` at a time (each batch open before
    /// the next starts, each reader within `timeout`); every `sampleEvery`-th one time-stamps its events.
    mutating func grow(
        to total: Int, port: Int, path: String, counting: String, sampleEvery: Int, final: String? = nil, batch: Int = 250,
        timeout: Duration = .seconds(60)
    ) async throws {
        while readers.count < total {
            var opening: [SSEConsumer] = []
            for i in readers.count..<min(total, readers.count + batch) {
                opening.append(
                    try await SSEConsumer.open(port: port, path, token: "", counting: counting, stampField: i % sampleEvery == 0, final: final))
            }
            for consumer in opening { try await consumer.waitUntilOpen(timeout: timeout) }
            readers += opening
        }
    }

    /// Events counted by all readers so far.
    var counted: Int { readers.reduce(0) { $0 + $1.snapshot.counted } }

    /// Waits, polling every 100 ms until `deadline`, for delivery to end: `finished()` holds (say,
    /// the publisher is done), and every reader has counted `expected` events, or has got the last
    /// change's mark (`untilFinal`: the readers were opened with one), or (neither given) something
    /// has arrived and nothing more for `quiet`.
    func waitForDelivery(
        deadline: ContinuousClock.Instant, quiet: Duration = .seconds(1), expected: Int? = nil, untilFinal: Bool = false,
        finished: () -> Bool = { true }
    ) async throws {
        let all = expected.map { $0 * readers.count }
        var quietSince = ContinuousClock.now
        var last = -1
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            let seen = counted
            if seen != last {
                last = seen
                quietSince = .now
            }
            guard finished() else { continue }
            if let all, seen >= all { break }
            if untilFinal {
                if readers.allSatisfy({ $0.snapshot.sawFinal }) { break }
                continue
            }
            if seen > 0, ContinuousClock.now - quietSince > quiet { break }
        }
    }

    /// The counts now, the changes having started at `start`.
    func delivery(since start: ContinuousClock.Instant, expected: Int? = nil) -> Delivery {
        let counts = readers.map(\.snapshot)
        let lastArrival = counts.compactMap(\.lastCounted).max() ?? .now
        return Delivery(
            events: counts.reduce(0) { $0 + $1.counted }, seconds: max((lastArrival - start).seconds, 0.001),
            perReader: Set(counts.map(\.counted)), complete: expected.map { n in counts.filter { $0.counted == n }.count } ?? counts.count,
            closed: counts.filter(\.closed).count, final: counts.filter(\.sawFinal).count,
            latencies: counts.flatMap(\.latencies).map { $0 / 1000 }.sorted(),
            dataBytes: counts.compactMap(\.lastDataBytes).max())
    }

    func close() { for reader in readers { reader.close() } }
}

/// A run that opened `readers` readers and published `published` changes to them (nchan's part
/// and the raw broadcaster's): its rates and completeness, derived the same way for both.
protocol FanOutRun {
    var readers: Int { get }
    var openSeconds: Double { get }
    var published: Int { get }
    var delivery: ReaderCrowd.Delivery { get }
}

extension FanOutRun {
    var openRate: Double { Double(readers) / openSeconds }
    var aggregate: Double { Double(delivery.events) / delivery.seconds }
    /// Every reader got every change published, and no stream ended.
    var everyReaderGotEverything: Bool { delivery.perReader == [published] && published > 0 && delivery.closed == 0 }
}
