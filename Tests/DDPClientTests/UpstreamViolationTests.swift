import CompressNIO
import DDP
import FaultKit
import Logging
import NIOCore
import NIOWebSocket
import Synchronization
import Testing

@testable import DDPClient

/// An upstream that breaks the WebSocket protocol, through a real socket: the client drops the
/// link and reconnects with backoff (docs/ARCHITECTURE.md, "Faults the client survives"); and
/// one that sends garbage with every message does not flood the log.
@Suite(.timeLimit(.minutes(1))) struct UpstreamViolationTests {
    /// The connections a fake upstream took.
    final class Arrivals: Sendable {
        private let counted = Mutex(0)

        var count: Int { counted.withLock { $0 } }

        /// Counts one; its number (1 for the first).
        func arrived() -> Int {
            counted.withLock {
                $0 += 1
                return $0
            }
        }
    }

    /// A fake upstream whose first connection runs `first` after the client's `connect`, and whose
    /// later ones answer as a plain Meteor server with the session `second`.
    static func upstream(arrivals: Arrivals, first: @escaping @Sendable (FakeConnection) async throws -> Void) -> FakeUpstream {
        FakeUpstream { connection in
            if arrivals.arrived() == 1 {
                _ = try await connection.receive("connect")
                try await first(connection)
                // Held open until the client goes.
                while true { _ = try await connection.receive() }
            }
            try await connection.handshake(session: "second")
            try await connection.serve()
        }
    }

    /// A client of `upstream` (compression off, the default) until `body` returns; `body` gets
    /// the client's connection states as they happen.
    static func withClient(
        _ upstream: FakeUpstream, logger: Logger = Logger(label: "test-client"),
        _ body: (DDPClient, AsyncStream<ConnectionState>) async throws -> Void
    ) async throws {
        var options = DDPClientOptions(url: upstream.url)
        options.protocolConfiguration.reconnect = ReconnectPolicy(initialDelay: .milliseconds(50), multiplier: 2, maxDelay: .milliseconds(200))
        let (states, continuation) = AsyncStream<ConnectionState>.makeStream()
        let client = DDPClient(
            options: options, logger: logger,
            events: ClosureEventSink { event in
                if case .stateChanged(let state) = event { continuation.yield(state) }
            })
        await client.start()
        do {
            try await body(client, states)
        } catch {
            await client.close()
            throw error
        }
        await client.close()
    }

    /// The session of the first `connected`, and the states before it.
    static func firstConnection(_ states: AsyncStream<ConnectionState>) async -> (session: String?, before: [ConnectionState]) {
        var before: [ConnectionState] = []
        for await state in states {
            if case .connected(let session, _) = state { return (session, before) }
            before.append(state)
        }
        return (nil, before)
    }

    static func droppedAndReconnected(_ before: [ConnectionState]) -> Bool {
        before.contains { if case .reconnecting = $0 { true } else { false } }
    }

    /// A server never masks its frames (RFC 6455 §5.1). The masked `connected` was taken as the
    /// upstream's answer before; now it drops the link, and the client connects again.
    @Test func aMaskedFrameDropsTheLinkAndTheClientReconnects() async throws {
        let arrivals = Arrivals()
        let key = try #require(WebSocketMaskingKey([0x11, 0x22, 0x33, 0x44]))
        let upstream = Self.upstream(arrivals: arrivals) { connection in
            // NIO's encoder masks the data with the frame's key.
            let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: key, data: ByteBuffer(string: #"{"msg":"connected","session":"masked"}"#))
            try await connection.send(frame: frame)
        }
        try await upstream.start()
        try await Self.withClient(upstream) { _, states in
            let (session, before) = await Self.firstConnection(states)
            #expect(session == "second", "the masked frame's message was taken")
            #expect(Self.droppedAndReconnected(before), "\(before)")
        }
        await upstream.stop()
    }

    /// Text that is not UTF-8 (RFC 6455 §8.1) was dropped with a warning, and the connection went
    /// on (its next message was read); now the link is dropped, and the client connects again.
    @Test func aTextMessageThatIsNotUTF8DropsTheLinkAndTheClientReconnects() async throws {
        let arrivals = Arrivals()
        let upstream = Self.upstream(arrivals: arrivals) { connection in
            var bytes = ByteBuffer(string: #"{"msg":"connected","session":""#)
            bytes.writeBytes([0xC3, 0x28])
            bytes.writeString(#""}"#)
            try await connection.send(frame: WebSocketFrame(fin: true, opcode: .text, data: bytes))
            try await connection.send(#"{"msg":"connected","session":"after-bad-text"}"#)
        }
        try await upstream.start()
        try await Self.withClient(upstream) { _, states in
            let (session, before) = await Self.firstConnection(states)
            #expect(session == "second", "the connection went on after text that is not UTF-8")
            #expect(Self.droppedAndReconnected(before), "\(before)")
        }
        await upstream.stop()
    }

    /// Compression is off (the default), so nothing is offered: an upgrade answer agreeing to
    /// `permessage-deflate` anyway fails the attempt (RFC 6455 §9.1). Before, the client took the
    /// agreement and inflated the upstream's compressed `connected`.
    @Test func anAgreementToCompressionThatWasNotOfferedFailsEveryAttempt() async throws {
        let arrivals = Arrivals()
        let upstream = FakeUpstream(claimedExtensions: "permessage-deflate") { connection in
            _ = arrivals.arrived()
            _ = try await connection.receive("connect")
            // `{"msg":"connected","session":"deflated"}` as permessage-deflate sends it (a fixed
            // Huffman block; the sync flush's last four bytes taken off).
            try await connection.send(frame: WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: try Self.deflatedConnected))
            while true { _ = try await connection.receive() }
        }
        try await upstream.start()
        try await Self.withClient(upstream) { _, states in
            // Until it connects (it did before), or two attempts have failed and it tries a third.
            var seen: [ConnectionState] = []
            var causes: [UpstreamFailure.Cause?] = []
            for await state in states {
                seen.append(state)
                if case .connected = state { break }
                if case .reconnecting(_, _, let cause) = state { causes.append(cause?.cause) }
                if causes.count == 2 { break }
            }
            #expect(causes.count == 2, "\(seen)")
            // Both ended after the upstream's answer, for the same reason (the upstream's own
            // count of arrivals lags the client's news: its handler runs after its upgrade).
            #expect(causes.first != nil && causes.first == causes.last, "\(seen)")
            #expect(arrivals.count >= 1)
        }
        await upstream.stop()
    }

    /// 20,000 garbage frames made 40,000 log lines. Now, per connection, a warning of a kind the
    /// upstream can repeat is logged once, then at most once per interval.
    @Test func garbageFromTheUpstreamIsNotLoggedOncePerMessage() async throws {
        let log = RecordedLog()
        let (done, finished) = AsyncStream<Void>.makeStream()
        let upstream = FakeUpstream { connection in
            try await connection.handshake()
            for _ in 0..<500 { try await connection.send("not DDP") }
            for _ in 0..<500 { try await connection.send(#"{"msg":"error","reason":"bad request"}"#) }
            // The client reads in order: its pong says it has read all of them.
            try await connection.send(#"{"msg":"ping","id":"last"}"#)
            while try await connection.receive("pong")["id"] != "last" {}
            finished.yield()
            while true { _ = try await connection.receive() }
        }
        try await upstream.start()
        var logger = Logger(label: "test-client") { _ in RecordingLogHandler(recorded: log) }
        logger.logLevel = .warning
        try await Self.withClient(upstream, logger: logger) { _, _ in
            var iterator = done.makeAsyncIterator()
            await iterator.next()
        }
        await upstream.stop()
        #expect(log.messages.filter { $0 == "ignored an unreadable message from the upstream" }.count == 1, "\(log.messages.count) lines")
        #expect(log.messages.filter { $0 == "the upstream reported a protocol error" }.count == 1, "\(log.messages.count) lines")
    }

    /// The throttle as a transcript: the first warning of a kind, then one per interval saying
    /// how many were held back since; kinds apart.
    @Test func warningsOfAKindAreLoggedOncePerIntervalWithHowManyWereHeldBack() {
        var throttle = WarningThrottle<String>(interval: .seconds(10))
        let start = ContinuousClock.now
        #expect(throttle.admit("garbage", at: start) == 0)
        #expect(throttle.admit("garbage", at: start + .seconds(1)) == nil)
        #expect(throttle.admit("error", at: start + .seconds(1)) == 0, "another kind is not held back")
        #expect(throttle.admit("garbage", at: start + .seconds(9)) == nil)
        #expect(throttle.admit("garbage", at: start + .seconds(10)) == 2, "two held back since")
        #expect(throttle.admit("garbage", at: start + .seconds(11)) == nil)
        #expect(throttle.admit("garbage", at: start + .seconds(60)) == 1)
        #expect(throttle.admit("garbage", at: start + .seconds(120)) == 0)
    }

    /// `{"msg":"connected","session":"deflated"}` compressed with a sync flush, without its last
    /// four bytes (RFC 7692 §7.2.1).
    static var deflatedConnected: ByteBuffer {
        get throws {
            var input = ByteBuffer(string: #"{"msg":"connected","session":"deflated"}"#)
            let output = try input.compressStream(with: ZlibCompressor(algorithm: .deflate), flush: .sync, allocator: ByteBufferAllocator())
            return try #require(output.getSlice(at: output.readerIndex, length: output.readableBytes - 4))
        }
    }
}

/// Log messages kept in memory.
final class RecordedLog: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ message: String) { lines.withLock { $0.append(message) } }
    var messages: [String] { lines.withLock { $0 } }
}

/// A log handler writing each message's text into a ``RecordedLog``.
struct RecordingLogHandler: LogHandler {
    let recorded: RecordedLog
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { recorded.append(event.message.description) }
}
