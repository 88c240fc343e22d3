import Bridge
import DDP
import DDPClient
import DDPServer
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One measured figure, with the baseline it is compared against when it has one.
struct Figure: Codable, Sendable {
    let section: String
    let name: String
    let value: Double
    let unit: String
    var baseline: String?
    var baselineValue: Double?
    var ratio: Double?
    var note: String?

    init(_ section: String, _ name: String, _ value: Double, _ unit: String,
         baseline: String? = nil, baselineValue: Double? = nil, note: String? = nil) {
        self.section = section
        self.name = name
        self.value = value
        self.unit = unit
        self.baseline = baseline
        self.baselineValue = baselineValue
        self.ratio = baselineValue.map { $0 > 0 ? value / $0 : 0 }
        self.note = note
    }
}

/// A target of issue #6, judged on a measured figure.
struct Target: Codable, Sendable {
    let name: String
    let goal: String
    let measured: String
    /// Measured over goal, oriented so that ≥ 1 meets it (for a ceiling: goal over measured).
    let score: Double
    var met: Bool { score >= 1 }
}

enum Stats {
    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        return values.sorted()[values.count / 2]
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let index = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))
        return sorted[index]
    }
}

let quietLogger: Logger = {
    var logger = Logger(label: "bench")
    logger.logLevel = .error
    return logger
}()

/// The in-process demo DDP server.
func startUpstream() async throws -> LocalDDPServer {
    let server = LocalDDPServer(configuration: DemoDataSet.configuration, logger: quietLogger)
    try await DemoDataSet.seed(server.core)
    try await server.start()
    return server
}

/// The project's DDP client, connected to `url` (bounded wait); cancel the task to stop it.
func connectedClient(url: String) async throws -> (DDPClient, Task<Void, Never>) {
    let client = DDPClient(options: DDPClientOptions(url: url), logger: quietLogger)
    let runner = Task { await client.run() }
    let deadline = ContinuousClock.now + .seconds(20)
    while await !client.isConnected {
        guard ContinuousClock.now < deadline else {
            runner.cancel()
            throw BenchError("the DDP client did not connect")
        }
        try await Task.sleep(for: .milliseconds(5))
    }
    return (client, runner)
}

/// A Hummingbird application run in its own service group, on a loopback port.
struct RunningServer: Sendable {
    let port: Int
    let group: ServiceGroup
    let task: Task<Void, any Error>

    static func start<A: ApplicationProtocol>(_ make: (@escaping @Sendable (any Channel) async -> Void) -> A, extra: [any Service] = []) async throws -> RunningServer {
        let (ports, sink) = AsyncStream<Int>.makeStream()
        let application = make { channel in sink.yield(channel.localAddress?.port ?? 0) }
        let group = ServiceGroup(configuration: .init(services: [application] + extra, logger: quietLogger))
        let task = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else { throw BenchError("a server did not start") }
        return RunningServer(port: port, group: group, task: task)
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}

/// The bridge in this process, in front of `upstream`.
func startBridge(upstream: String, configure: (inout BridgeConfiguration) -> Void = { _ in }) async throws -> RunningServer {
    var configuration = BridgeConfiguration(upstream: upstream)
    configuration.loginRateLimit = (1_000_000, .seconds(10))
    configuration.sessionRateLimit = (1_000_000, .seconds(10))
    configuration.maxSessionsPerAddress = 100_000
    configuration.maxSessions = 100_000
    configuration.maxStreamsPerSession = 1_000
    configuration.streamBufferLimit = 64 << 20
    configuration.publicFolder = nil
    configure(&configuration)
    return try await RunningServer.start { onRunning in
        BridgeApplication.make(
            configuration: configuration, http: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)), logger: quietLogger,
            onServerRunning: onRunning
        ).application
    }
}

// MARK: - A small HTTP/1.1 client (one request per connection)

enum HTTP {
    struct Reply: Sendable {
        let status: Int
        let body: String
        var json: EJSON { (try? EJSONParser.parse(body)) ?? .null }
    }

    /// One request on its own connection (`Connection: close`).
    static func request(port: Int, _ method: HTTPMethod, _ path: String, token: String? = nil, body: String? = nil) async throws -> Reply {
        try await withConnection(port: port) { try await $0.send(method, path, token: token, body: body, close: true) }
    }

    /// Requests made one after another on one kept-alive connection.
    final class Exchange {
        private var inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
        private let outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>

        init(_ inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>, _ outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>) {
            self.inbound = inbound.makeAsyncIterator()
            self.outbound = outbound
        }

        func send(_ method: HTTPMethod, _ path: String, token: String? = nil, body: String? = nil, close: Bool = false) async throws -> Reply {
            var headers = HTTPHeaders([("Host", "127.0.0.1"), ("Connection", close ? "close" : "keep-alive")])
            if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
            if let body {
                headers.add(name: "Content-Type", value: "application/json")
                headers.add(name: "Content-Length", value: String(body.utf8.count))
            }
            try await outbound.write(.head(HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)))
            if let body { try await outbound.write(.body(.byteBuffer(ByteBuffer(string: body)))) }
            try await outbound.write(.end(nil))
            var status = 0
            var text = ""
            while let part = try await inbound.next() {
                switch part {
                case .head(let head): status = Int(head.status.code)
                case .body(let buffer): text += String(buffer: buffer)
                case .end: return Reply(status: status, body: text)
                }
            }
            throw BenchError("the connection closed before the reply to \(method) \(path) ended")
        }
    }

    static func withConnection<T: Sendable>(port: Int, _ body: (Exchange) async throws -> T) async throws -> T {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in try await body(Exchange(inbound, outbound)) }
    }

    /// A new bridge session; returns its token.
    static func session(port: Int, login: String = "{}") async throws -> String {
        let reply = try await request(port: port, .POST, "/v1/sessions", body: login)
        guard reply.status == 201, let token = reply.json["token"]?.stringValue else {
            throw BenchError("session creation failed: \(reply.status) \(reply.body)")
        }
        return token
    }
}

// MARK: - A Server-Sent Events consumer

/// Counts (and optionally time-stamps) the events of one stream, parsing the wire format on the
/// event loop as bytes arrive.
final class SSEConsumer: Sendable {
    struct Counts: Sendable {
        var counted = 0
        var lastCounted: ContinuousClock.Instant?
        var latencies: [Double] = []
        var status = 0
        var closed = false
    }

    let counts = NIOLockedValueBox(Counts())
    let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    /// Opens `GET path` and counts events named `counting`; with `stampField`, records for each
    /// such event the microseconds between the stamp in its data and its arrival.
    /// With `slow`, the socket is read only when ``readOnce()`` is called (a consumer that falls behind).
    static func open(port: Int, _ path: String, token: String, counting: String, stampField: Bool = false, slow: Bool = false) async throws -> SSEConsumer {
        let handlerBox = NIOLockedValueBox<SSEHandler?>(nil)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.autoRead, value: !slow)
            .channelOption(.recvAllocator, value: slow ? FixedSizeRecvByteBufferAllocator(capacity: 4096) : AdaptiveRecvByteBufferAllocator())
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    let handler = SSEHandler(counting: Array(counting.utf8), stamp: stampField)
                    handlerBox.withLockedValue { $0 = handler }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        let consumer = SSEConsumer(channel: channel)
        handlerBox.withLockedValue { $0?.consumer = consumer }
        var headers = HTTPHeaders([("Host", "127.0.0.1"), ("Accept", "text/event-stream"), ("Authorization", "Bearer \(token)")])
        headers.add(name: "Connection", value: "keep-alive")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        try await channel.writeAndFlush(HTTPClientRequestPart.head(head)).get()
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        return consumer
    }

    var snapshot: Counts { counts.withLockedValue { $0 } }

    /// Waits until the response head has arrived (the stream is attached), bounded.
    func waitUntilOpen(timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while snapshot.status == 0 {
            guard ContinuousClock.now < deadline else { throw BenchError("a stream did not open") }
            try await Task.sleep(for: .milliseconds(2))
        }
        guard snapshot.status == 200 else { throw BenchError("a stream answered \(snapshot.status)") }
    }

    func close() { channel.close(promise: nil) }

    /// One read of at most 4 KiB from a `slow` consumer's socket.
    func readOnce() { channel.read() }
}

/// Runs `body(0..<count)` with at most `concurrency` at a time; the first error ends the run.
func forEachBounded(_ count: Int, concurrency: Int, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        while next < min(concurrency, count) {
            let index = next
            group.addTask { try await body(index) }
            next += 1
        }
        while try await group.next() != nil {
            if next < count {
                let index = next
                group.addTask { try await body(index) }
                next += 1
            }
        }
    }
}

/// The channel handler behind `SSEConsumer`: splits lines, dispatches events on blank lines.
final class SSEHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    weak var consumer: SSEConsumer?
    let counting: [UInt8]
    let stamp: Bool
    private var line: [UInt8] = []
    private var name: [UInt8] = []
    private var data: [UInt8] = []
    private var pendingCounted = 0
    private var pendingLatencies: [Double] = []

    init(counting: [UInt8], stamp: Bool) {
        self.counting = counting
        self.stamp = stamp
        line.reserveCapacity(256)
    }

    func channelRead(context: ChannelHandlerContext, data part: NIOAny) {
        switch unwrapInboundIn(part) {
        case .head(let head):
            consumer?.counts.withLockedValue { $0.status = Int(head.status.code) }
        case .body(let buffer):
            if stamp {
                buffer.withUnsafeReadableBytes { bytes in
                    for byte in bytes {
                        if byte == 0x0A { endLine() } else { line.append(byte) }
                    }
                }
            } else {
                countEvents(buffer)
            }
            flush()
        case .end:
            flush()
            consumer?.counts.withLockedValue { $0.closed = true }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        consumer?.counts.withLockedValue { $0.closed = true }
    }

    /// Counting only (no stamps): finds each `event: <name>` line with `memchr`, so that a
    /// hundred consumers in the benchmark's own process cost little next to the bridge.
    private var carry: [UInt8] = []
    private lazy var needle: [UInt8] = Array("\nevent: ".utf8) + counting + [0x0A]

    private func countEvents(_ buffer: ByteBuffer) {
        var bytes = carry
        bytes.append(contentsOf: buffer.readableBytesView)
        let needle = self.needle
        bytes.withUnsafeBufferPointer { all in
            guard let base = all.baseAddress else { return }
            var offset = 0
            while offset < all.count, let hit = memchr(base + offset, 0x0A, all.count - offset) {
                let position = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                guard position + needle.count <= all.count else { break }
                if memcmp(base + position, needle, needle.count) == 0 {
                    pendingCounted += 1
                }
                offset = position + 1
            }
        }
        carry = Array(bytes.suffix(needle.count - 1))
    }

    private static let eventPrefix = Array("event: ".utf8)
    private static let dataPrefix = Array("data: ".utf8)

    private func endLine() {
        if line.isEmpty {
            if name == counting {
                pendingCounted += 1
                if stamp, let at = Self.stampValue(data) {
                    pendingLatencies.append(Double(DemoDataSet.monotonicMicroseconds() - at))
                }
            }
            name.removeAll(keepingCapacity: true)
            data.removeAll(keepingCapacity: true)
        } else if line.starts(with: Self.eventPrefix) {
            name = Array(line[Self.eventPrefix.count...])
        } else if stamp, line.starts(with: Self.dataPrefix) {
            data = Array(line[Self.dataPrefix.count...])
        }
        line.removeAll(keepingCapacity: true)
    }

    private static let atKey = Array(#""at":"#.utf8)

    /// The integer after `"at":` in an event's data.
    static func stampValue(_ bytes: [UInt8]) -> Int? {
        guard bytes.count > atKey.count else { return nil }
        for start in 0...(bytes.count - atKey.count) where bytes[start] == atKey[0] && Array(bytes[start..<start + atKey.count]) == atKey {
            var value = 0
            var i = start + atKey.count
            var digits = 0
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
                value = value * 10 + Int(bytes[i] - 0x30)
                i += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        return nil
    }

    private func flush() {
        guard pendingCounted > 0 else { return }
        let now = ContinuousClock.now
        let (counted, latencies) = (pendingCounted, pendingLatencies)
        pendingCounted = 0
        pendingLatencies.removeAll(keepingCapacity: true)
        consumer?.counts.withLockedValue { counts in
            counts.lastCounted = now
            counts.counted += counted
            counts.latencies += latencies
        }
    }
}
