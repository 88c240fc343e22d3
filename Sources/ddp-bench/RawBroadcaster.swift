import DDP
import DDPServer
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The ceiling the public fan-out's delivery is measured against: a minimal SwiftNIO
/// broadcaster, one event loop per core, that answers every `GET` with an event stream and, per
/// change, writes one pre-encoded frame to every reader's socket — nothing else (no sessions, no
/// log, no filters, no budgets). Changes that queue while a loop is still writing the previous
/// ones go out together, one write per reader (as the bridge's writer does: without it, a loop
/// behind makes a syscall per change and reader, and falls further behind). Run with the public
/// part's readers, rates and sampling, in the same run: what the same cores can do, so the
/// bridge's latency has something to be compared to.
final class RawBroadcaster: Sendable {
    /// The readers of one event loop and the frames pending for them. A change appends its frame
    /// and, when no write job is due, schedules one; the job takes everything pending and writes
    /// it to each reader in one write. While a loop is behind (writing to its readers takes longer
    /// than the time between changes), the changes that queued meanwhile go out together: one
    /// syscall per reader per turn of the loop, as the bridge's own writer does.
    private final class LoopReaders: Sendable {
        struct State {
            var channels: [ObjectIdentifier: any Channel] = [:]
            /// Bytes pending; a write job is due while there are any (a frame is never empty).
            var pending = ByteBuffer()
        }
        let loop: any EventLoop
        private let state = NIOLockedValueBox(State())

        init(loop: any EventLoop) { self.loop = loop }

        func add(_ channel: any Channel) { state.withLockedValue { $0.channels[ObjectIdentifier(channel)] = channel } }
        func remove(_ channel: any Channel) { _ = state.withLockedValue { $0.channels.removeValue(forKey: ObjectIdentifier(channel)) } }
        var count: Int { state.withLockedValue { $0.channels.count } }

        func broadcast(_ frame: ByteBuffer) {
            let schedule = state.withLockedValue { state in
                var frame = frame
                defer { state.pending.writeBuffer(&frame) }
                return state.pending.readableBytes == 0
            }
            if schedule { loop.execute { self.write() } }
        }

        /// On the loop: everything pending, one write per reader.
        private func write() {
            let (channels, bytes) = state.withLockedValue { state in
                defer { state.pending = ByteBuffer() }
                return (Array(state.channels.values), state.pending)
            }
            guard bytes.readableBytes > 0 else { return }
            let part = HTTPServerResponsePart.body(.byteBuffer(bytes))
            for channel in channels { channel.writeAndFlush(part, promise: nil) }
        }
    }

    /// The readers, by their loop.
    private final class Registry: Sendable {
        private let loops: [ObjectIdentifier: LoopReaders]

        init(group: MultiThreadedEventLoopGroup) {
            loops = Dictionary(uniqueKeysWithValues: group.makeIterator().map { (ObjectIdentifier($0), LoopReaders(loop: $0)) })
        }

        func add(_ channel: any Channel) { loops[ObjectIdentifier(channel.eventLoop)]?.add(channel) }
        func remove(_ channel: any Channel) { loops[ObjectIdentifier(channel.eventLoop)]?.remove(channel) }
        var count: Int { loops.values.reduce(0) { $0 + $1.count } }

        /// One change: its frame pending on every loop.
        func broadcast(_ frame: ByteBuffer) { for readers in loops.values { readers.broadcast(frame) } }
    }

    /// Answers the request head with an event stream's head, then holds the reader.
    private final class ReaderHandler: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let registry: Registry

        init(registry: Registry) { self.registry = registry }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .head = unwrapInboundIn(data) else { return }
            // Held before its head goes out: a reader that sees its head open is counted.
            registry.add(context.channel)
            let headers = HTTPHeaders([("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: ": open\n\n")))), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            registry.remove(context.channel)
            context.fireChannelInactive()
        }
    }

    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let server: any Channel
    private let registry: Registry

    private init(port: Int, group: MultiThreadedEventLoopGroup, server: any Channel, registry: Registry) {
        self.port = port
        self.group = group
        self.server = server
        self.registry = registry
    }

    /// Listens on a free loopback port with one event loop per core.
    static func start() async throws -> RawBroadcaster {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let registry = Registry(group: group)
        do {
            let server = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 4096)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(ReaderHandler(registry: registry))
                    }
                }
                .bind(host: "127.0.0.1", port: 0).get()
            guard let port = server.localAddress?.port else { throw BenchError("the broadcaster has no port") }
            return RawBroadcaster(port: port, group: group, server: server, registry: registry)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    var readerCount: Int { registry.count }

    /// One change: the frame, encoded once, pending on every loop (see ``LoopReaders``).
    func broadcast(_ frame: ByteBuffer) { registry.broadcast(frame) }

    func stop() async {
        try? await server.close()
        try? await group.shutdownGracefully()
    }

    // MARK: - The measurement

    struct Result: FanOutRun {
        let readers: Int
        let openSeconds: Double
        let published: Int
        let delivery: ReaderCrowd.Delivery
    }

    /// Opens `readers` readers (as the public part opens its own), then sends `count` changes at
    /// `rate`, each stamped as the ticker stamps its own (nchan's message shape, `dataBytes` of data
    /// when given), and counts what the readers get. The broadcaster runs as its own process, as
    /// the bridge and nginx do: its sockets and the readers' together are more files than one
    /// process may open here (20,000), and its cores are then shared as theirs are.
    static func run(readers: Int, rate: Int, count: Int, dataBytes: Int?) async throws -> Result {
        let broadcaster = try await Child.start()
        let first = try await SSEConsumer.open(port: broadcaster.port, "/events", token: "", counting: "changed", stampField: true)
        var crowd = ReaderCrowd(first: first)
        do {
            try await first.waitUntilOpen()
            let openStart = ContinuousClock.now
            try await crowd.grow(to: readers, port: broadcaster.port, path: "/events", counting: "changed", sampleEvery: max(1, readers / 100))
            let openSeconds = (ContinuousClock.now - openStart).seconds
            // Every reader's head is answered before it counts as open; its registration came first.
            let held = try await broadcaster.ask("count", answer: "readers")
            guard held == readers else { throw BenchError("the broadcaster holds \(held) of \(readers) readers") }
            let start = ContinuousClock.now
            let finished = NIOLockedValueBox(false)
            async let sending = broadcaster.ask(
                "send \(rate) \(count) \(dataBytes ?? 0)", answer: "sent", within: .seconds(Double(count) / Double(rate) + 120), finished: finished)
            try await crowd.waitForDelivery(
                deadline: start + .seconds(Double(count) / Double(rate) + 120), expected: count, finished: { finished.withLockedValue { $0 } })
            let published = try await sending
            let result = Result(
                readers: readers, openSeconds: openSeconds, published: published, delivery: crowd.delivery(since: start, expected: count))
            crowd.close()
            broadcaster.stop()
            return result
        } catch {
            crowd.close()
            broadcaster.stop()
            throw error
        }
    }

    /// Sends `count` changes at `rate` (a change that falls due late goes out as soon as it can,
    /// as the ticker's do); returns how many were sent.
    private func send(rate: Int, count: Int, dataBytes: Int?) async throws -> Int {
        var previousAt: Int?
        return try await paced(rate: rate, count: count) { n in
            let at = DemoDataSet.monotonicMicroseconds()
            let data = NchanBench.message(n: n, at: at, previousAt: previousAt, size: dataBytes)
            broadcast(ByteBuffer(string: "event: changed\ndata: \(data)\n\n"))
            previousAt = at
        }
    }

    // MARK: - Its own process

    /// The argument that makes `ddp-bench` the broadcaster's process (``serve()``).
    static let serveArgument = "--serve-raw-broadcaster"

    /// The broadcaster's process: says `port N`, then answers lines on its standard input —
    /// `count` with `readers N`, `send RATE COUNT BYTES` with `sent N` once sent — until it ends.
    static func serve() async throws {
        let broadcaster = try await start()
        func answer(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
        answer("port \(broadcaster.port)")
        // Blocking reads: this process has nothing else for its task to do meanwhile.
        while let line = readLine() {
            let words = line.split(separator: " ").compactMap { Int($0) }
            if line == "count" {
                answer("readers \(broadcaster.readerCount)")
            } else if line.hasPrefix("send "), words.count == 3, words[0] > 0, words[1] >= 0 {
                let sent = try await broadcaster.send(rate: words[0], count: words[1], dataBytes: words[2] > 0 ? words[2] : nil)
                answer("sent \(sent)")
            } else {
                answer("error: \(line)")
            }
        }
        await broadcaster.stop()
    }

    /// The broadcaster's process, seen from the harness.
    struct Child {
        let process: Process
        let port: Int
        private let input: Pipe
        private let output: Pipe
        private let lines: NIOLockedValueBox<[String]>

        static func start() async throws -> Child {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            process.arguments = [serveArgument]
            let (input, output) = (Pipe(), Pipe())
            process.standardInput = input
            process.standardOutput = output
            let lines = NIOLockedValueBox<[String]>([])
            let partial = NIOLockedValueBox("")
            output.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                guard !data.isEmpty else { return }
                partial.withLockedValue { text in
                    text += String(decoding: data, as: UTF8.self)
                    while let end = text.firstIndex(of: "\n") {
                        let line = String(text[..<end])
                        text = String(text[text.index(after: end)...])
                        lines.withLockedValue { $0.append(line) }
                    }
                }
            }
            try process.run()
            do {
                let port = try await wait(for: "port", in: lines, of: process, within: .seconds(30))
                Priority.level(process.processIdentifier)
                return Child(process: process, port: port, input: input, output: output, lines: lines)
            } catch {
                Child(process: process, port: 0, input: input, output: output, lines: lines).stop()
                throw error
            }
        }

        /// Sends `command` and returns the number of the answer that starts with `answer`.
        func ask(_ command: String, answer: String, within limit: Duration = .seconds(30), finished: NIOLockedValueBox<Bool>? = nil) async throws
            -> Int
        {
            defer { finished?.withLockedValue { $0 = true } }
            input.fileHandleForWriting.write(Data((command + "\n").utf8))
            return try await Self.wait(for: answer, in: lines, of: process, within: limit)
        }

        /// Waits (polling, bounded) for a line `word N` among `lines`; takes it and returns N.
        private static func wait(for word: String, in lines: NIOLockedValueBox<[String]>, of process: Process, within limit: Duration)
            async throws -> Int
        {
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                let found = lines.withLockedValue { lines -> Int? in
                    guard let index = lines.firstIndex(where: { $0.hasPrefix(word + " ") }) else { return nil }
                    return Int(lines.remove(at: index).dropFirst(word.count + 1))
                }
                if let found { return found }
                guard process.isRunning else { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            throw BenchError("the broadcaster's process did not answer '\(word)' (\(lines.withLockedValue { $0 }.joined(separator: "; ")))")
        }

        func stop() {
            try? input.fileHandleForWriting.close()
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            output.fileHandleForReading.readabilityHandler = nil
        }
    }
}

extension RawBroadcaster {
    /// The part's figures, section "broadcaster", with the bridge's public figures of the same run beside them.
    static func figures(
        fast: Result, slow: Result, rates: (fast: Int, slow: Int), bridge: (fast: PublicBench.Result?, slow: PublicBench.Result?)
    ) -> [Figure] {
        func complete(_ result: Result) -> String {
            "every reader got every change: \(result.everyReaderGotEverything) (\(result.delivery.complete) of \(result.readers) complete)"
        }
        var figures = [
            Figure(
                "broadcaster", "opening raw broadcaster readers", fast.openRate, "readers/s", baseline: bridge.fast.map { _ in "bridge" },
                baselineValue: bridge.fast?.openRate, note: "\(fast.readers) readers"),
            Figure(
                "broadcaster", "aggregate delivery to all readers at \(rates.fast) changes/s", fast.aggregate, "events/s",
                baseline: bridge.fast.map { _ in "bridge" }, baselineValue: bridge.fast?.aggregate,
                note: "\(fast.delivery.events) events in \(String(format: "%.1f", fast.delivery.seconds)) s; \(complete(fast))")
        ]
        for (result, rate, bridgeRun) in [(fast, rates.fast, bridge.fast), (slow, rates.slow, bridge.slow)] {
            for p in [50.0, 99.0] {
                figures.append(
                    Figure(
                        "broadcaster", "latency p\(Int(p)) at \(rate) changes/s, sampled readers", Stats.percentile(result.delivery.latencies, p),
                        "ms", baseline: bridgeRun.map { _ in "bridge" }, baselineValue: bridgeRun.map { Stats.percentile($0.latencies, p) },
                        note: "\(result.delivery.latencies.count) samples, from the change's stamp to a reader's receipt; \(complete(result))"))
            }
        }
        return figures
    }

    /// The bridge's p99 at the latency rate against the broadcaster's in the same run: within 1.5× its p99 + 10 ms.
    static func latencyTarget(broadcaster: Result, bridge: PublicBench.Result?, rate: Int, readers: Int) -> Target {
        let name = "p99 latency at \(Report.number(Double(rate))) changes/s to \(Report.number(Double(readers))) public readers vs a raw broadcaster"
        let goal = "≤ 1.5× the broadcaster's p99 + 10 ms"
        guard let bridge else { return Target(name: name, goal: goal, measured: "not measured: the public part did not run", score: 0) }
        let (ours, ceiling) = (Stats.percentile(bridge.latencies, 99), Stats.percentile(broadcaster.delivery.latencies, 99))
        let bound = 1.5 * ceiling + 10
        return Target(
            name: name, goal: goal, measured: String(format: "%.1f ms vs %.1f ms (bound %.1f ms)", ours, ceiling, bound),
            score: bridge.everyReaderGotEverything ? bound / max(ours, 0.01) : 0)
    }
}
