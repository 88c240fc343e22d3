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

// MARK: - A Server-Sent Events consumer

/// Counts (and optionally time-stamps) the events of one stream, parsing the wire format on the
/// event loop as bytes arrive.
final class SSEConsumer: Sendable {
    struct Counts: Sendable {
        var counted = 0
        var lastCounted: ContinuousClock.Instant?
        var latencies: [Double] = []
        /// Bytes of the `data:` of the last counted event (time-stamping consumers only).
        var lastDataBytes: Int?
        var status = 0
        var closed = false
        /// The stream carried the `final` bytes (the last change's mark) at some point.
        var sawFinal = false
    }

    let counts = NIOLockedValueBox(Counts())
    let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    /// Opens `GET path` and counts events named `counting`; with `stampField`, records for each
    /// such event the microseconds between the stamp in its data and its arrival.
    /// With `slow`, the socket is read only when ``readOnce()`` is called (a consumer that falls behind).
    /// With `final`, notes when those bytes (say, the last change's `"n":3000`) arrive.
    static func open(
        port: Int, _ path: String, token: String, counting: String, stampField: Bool = false, slow: Bool = false, final: String? = nil
    ) async throws -> SSEConsumer {
        let handlerBox = NIOLockedValueBox<SSEHandler?>(nil)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.autoRead, value: !slow)
            .channelOption(.recvAllocator, value: slow ? FixedSizeRecvByteBufferAllocator(capacity: 4096) : AdaptiveRecvByteBufferAllocator())
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    let handler = SSEHandler(counting: Array(counting.utf8), stamp: stampField, final: final.map { Array($0.utf8) })
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

/// The channel handler behind `SSEConsumer`: splits lines, dispatches events on blank lines.
final class SSEHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    weak var consumer: SSEConsumer?
    let counting: [UInt8]
    let stamp: Bool
    let final: [UInt8]?
    private var sawFinal = false
    private var line: [UInt8] = []
    private var name: [UInt8] = []
    private var data: [UInt8] = []
    private var pendingCounted = 0
    private var pendingLatencies: [Double] = []
    private var pendingDataBytes: Int?

    init(counting: [UInt8], stamp: Bool, final: [UInt8]?) {
        self.counting = counting
        self.stamp = stamp
        self.final = final
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
    /// The stream's start is a line start (a server may open with an `event:` line).
    private var carry: [UInt8] = [0x0A]
    private lazy var needle: [UInt8] = Array("\nevent: ".utf8) + counting + [0x0A]

    private func countEvents(_ buffer: ByteBuffer) {
        var bytes = carry
        bytes.append(contentsOf: buffer.readableBytesView)
        let needle = self.needle
        bytes.withUnsafeBufferPointer { all in
            guard let base = all.baseAddress else { return }
            if !sawFinal, let final, Self.find(final, in: UnsafeRawBufferPointer(all)) { sawFinal = true }
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
        carry = Array(bytes.suffix(max(needle.count, final?.count ?? 0) - 1))
    }

    /// Whether `needle` (not empty) occurs in `bytes`: `memchr` for its first byte, then `memcmp`.
    static func find(_ needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, let head = needle.first, bytes.count >= needle.count else { return false }
        var offset = 0
        while offset + needle.count <= bytes.count, let hit = memchr(base + offset, Int32(head), bytes.count - offset) {
            let position = base.distance(to: UnsafeRawPointer(hit))
            guard position + needle.count <= bytes.count else { return false }
            if memcmp(base + position, needle, needle.count) == 0 { return true }
            offset = position + 1
        }
        return false
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
                if stamp { pendingDataBytes = data.count }
                if !sawFinal, let final, data.withUnsafeBytes({ Self.find(final, in: $0) }) { sawFinal = true }
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
        let sawFinal = self.sawFinal
        let now = ContinuousClock.now
        let (counted, latencies, dataBytes) = (pendingCounted, pendingLatencies, pendingDataBytes)
        pendingCounted = 0
        pendingLatencies.removeAll(keepingCapacity: true)
        consumer?.counts.withLockedValue { counts in
            counts.lastCounted = now
            counts.counted += counted
            counts.latencies += latencies
            if let dataBytes { counts.lastDataBytes = dataBytes }
            counts.sawFinal = sawFinal
        }
    }
}
