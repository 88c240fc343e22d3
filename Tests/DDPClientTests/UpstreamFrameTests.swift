import CompressNIO
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import DDPClient

/// The upstream WebSocket's receiving side without a socket (``UpstreamFrameReader``), and its
/// shell on an `EmbeddedChannel` (``UpstreamFrameHandler``): messages, pings, the close
/// handshake, violations, and `permessage-deflate`.
@Suite struct UpstreamFrameTests {
    static func frame(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true, rsv1: Bool = false) -> WebSocketFrame {
        WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, data: ByteBuffer(string: text))
    }

    static func frame(_ opcode: WebSocketOpcode, bytes: ByteBuffer, fin: Bool = true, rsv1: Bool = false) -> WebSocketFrame {
        WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, data: bytes)
    }

    /// One message compressed as a `permessage-deflate` sender does: a sync flush, without the
    /// last four bytes (RFC 7692 §7.2.1). The compressor carries its context to the next message.
    static func deflate(_ text: String, with compressor: ZlibCompressor) throws -> ByteBuffer {
        var input = ByteBuffer(string: text)
        let output = try input.compressStream(with: compressor, flush: .sync, allocator: ByteBufferAllocator())
        #expect(output.readableBytes > 4)
        return output.getSlice(at: output.readerIndex, length: output.readableBytes - 4)!
    }

    static func text(_ outcome: UpstreamFrameReader.Outcome) -> String? {
        if case .message(let message) = outcome { return String(buffer: message) }
        return nil
    }

    // MARK: - The reader

    @Test func pingsArePongedWithTheirPayloadPongsDroppedAndACloseIsAnswered() throws {
        var reader = try UpstreamFrameReader(maxSize: 1_000, deflate: nil)
        #expect(try reader.read(Self.frame(.ping, "are you there")) == .pong(ByteBuffer(string: "are you there")))
        #expect(try reader.read(Self.frame(.pong, "yes")) == UpstreamFrameReader.Outcome.none)
        #expect(try reader.read(Self.frame(.connectionClose, "")) == .close)
    }

    @Test func aMessageIsWholeOnceItsLastFrameArrivesWithControlFramesBetween() throws {
        var reader = try UpstreamFrameReader(maxSize: 1_000, deflate: nil)
        #expect(Self.text(try reader.read(Self.frame(.text, #"{"msg":"ping"}"#))) == #"{"msg":"ping"}"#)
        #expect(try reader.read(Self.frame(.text, #"{"msg":"#, fin: false)) == UpstreamFrameReader.Outcome.none)
        // A control frame may come between the fragments of a message (RFC 6455 §5.4).
        #expect(try reader.read(Self.frame(.ping, "")) == .pong(ByteBuffer()))
        #expect(Self.text(try reader.read(Self.frame(.continuation, #""pong"}"#))) == #"{"msg":"pong"}"#)
        #expect(Self.text(try reader.read(Self.frame(.binary, "{}"))) == "{}")
    }

    @Test func whatNoExtensionClaimsIsAViolation() throws {
        var reader = try UpstreamFrameReader(maxSize: 1_000, deflate: nil)
        let violations: [WebSocketFrame] = [
            Self.frame(.text, "{}", rsv1: true),
            WebSocketFrame(fin: true, rsv2: true, opcode: .text, data: ByteBuffer(string: "{}")),
            WebSocketFrame(fin: true, rsv3: true, opcode: .binary, data: ByteBuffer(string: "{}")),
            Self.frame(WebSocketOpcode(encodedWebSocketOpcode: 0x3)!, "x"),
            Self.frame(.continuation, "x"),
            Self.frame(.ping, "x", fin: false)
        ]
        for frame in violations {
            #expect(throws: UpstreamTransportError.self, "\(frame)") { try reader.read(frame) }
        }
    }

    @Test func aMessageOverTheLimitIsKnownAsSuch() throws {
        var reader = try UpstreamFrameReader(maxSize: 10, deflate: nil)
        _ = try reader.read(Self.frame(.text, "12345", fin: false))
        #expect(throws: UpstreamTransportError.messageTooLarge(limit: 10)) { try reader.read(Self.frame(.continuation, "678901")) }
    }

    @Test func compressedMessagesInflateWithTheContextCarriedFromOneToTheNext() throws {
        let compressor = try ZlibCompressor(algorithm: .deflate)
        var reader = try UpstreamFrameReader(maxSize: 100_000, deflate: DeflateAgreement())
        let first = #"{"msg":"added","collection":"tasks","id":"a","fields":{"title":"compressible"}}"#
        let second = #"{"msg":"added","collection":"tasks","id":"b","fields":{"title":"compressible"}}"#
        #expect(Self.text(try reader.read(Self.frame(.text, bytes: Self.deflate(first, with: compressor), rsv1: true))) == first)
        // The second refers back to the first (context takeover): it inflates only if the first's context was kept.
        let compressedSecond = try Self.deflate(second, with: compressor)
        #expect(compressedSecond.readableBytes < 30)
        // In two fragments; RSV1 is on the first only.
        var fragments = compressedSecond
        let head = fragments.readSlice(length: 5)!
        #expect(try reader.read(Self.frame(.text, bytes: head, fin: false, rsv1: true)) == UpstreamFrameReader.Outcome.none)
        #expect(Self.text(try reader.read(Self.frame(.continuation, bytes: fragments))) == second)
        // A message sent uncompressed between them (RSV1 clear) is read as it is.
        #expect(Self.text(try reader.read(Self.frame(.text, "{}"))) == "{}")
    }

    /// A sender may end its deflate stream with a message (a final block); the next message is
    /// then a new stream, and must not be read as the old one's continuation.
    @Test func aMessageThatEndsItsDeflateStreamLeavesTheNextOneReadable() throws {
        var reader = try UpstreamFrameReader(maxSize: 1_000, deflate: DeflateAgreement())
        var first = ByteBuffer(string: #"{"msg":"ready","subs":["a"]}"#)
        let ended = try first.compressStream(with: ZlibCompressor(algorithm: .deflate), flush: .finish, allocator: ByteBufferAllocator())
        #expect(Self.text(try reader.read(Self.frame(.text, bytes: ended, rsv1: true))) == #"{"msg":"ready","subs":["a"]}"#)
        let second = try Self.deflate(#"{"msg":"ready","subs":["b"]}"#, with: ZlibCompressor(algorithm: .deflate))
        #expect(Self.text(try reader.read(Self.frame(.text, bytes: second, rsv1: true))) == #"{"msg":"ready","subs":["b"]}"#)
    }

    @Test func aCompressedMessageThatInflatesOverTheLimitIsKnownAsSuchAndGarbageIsAViolation() throws {
        let compressor = try ZlibCompressor(algorithm: .deflate)
        var reader = try UpstreamFrameReader(maxSize: 1_000, deflate: DeflateAgreement())
        let bomb = try Self.deflate(String(repeating: "a", count: 50_000), with: compressor)
        #expect(bomb.readableBytes < 1_000)
        #expect(throws: UpstreamTransportError.messageTooLarge(limit: 1_000)) { try reader.read(Self.frame(.text, bytes: bomb, rsv1: true)) }
        var fresh = try UpstreamFrameReader(maxSize: 1_000, deflate: DeflateAgreement())
        #expect(throws: UpstreamTransportError.self) { try fresh.read(Self.frame(.text, "\u{FF}\u{FF}not deflate", rsv1: true)) }
    }

    @Test func theAgreementIsReadFromTheUpgradeAnswer() throws {
        func answer(_ values: String...) -> HTTPFields {
            var fields = HTTPFields()
            for value in values { fields.append(HTTPField(name: .secWebSocketExtensions, value: value)) }
            return fields
        }
        #expect(try DeflateAgreement.agreed(in: answer(), offered: true) == nil)
        #expect(try DeflateAgreement.agreed(in: answer("permessage-deflate"), offered: true) == DeflateAgreement())
        #expect(
            try DeflateAgreement.agreed(
                in: answer("permessage-deflate; server_no_context_takeover; client_max_window_bits=15"), offered: true)
                == DeflateAgreement(serverNoContextTakeover: true))
        #expect(throws: UpstreamTransportError.self) { try DeflateAgreement.agreed(in: answer("x-webkit-deflate-frame"), offered: true) }
        #expect(throws: UpstreamTransportError.self) {
            try DeflateAgreement.agreed(in: answer("permessage-deflate", "permessage-deflate"), offered: true)
        }
    }

    /// Compression off (the default) offers nothing: an answer agreeing to `permessage-deflate`
    /// anyway fails the connection (RFC 6455 §9.1), and nothing is ever inflated.
    @Test func anAgreementToWhatWasNotOfferedIsAViolation() throws {
        var fields = HTTPFields()
        fields.append(HTTPField(name: .secWebSocketExtensions, value: "permessage-deflate"))
        #expect(throws: UpstreamTransportError.self) { try DeflateAgreement.agreed(in: fields, offered: false) }
        #expect(try DeflateAgreement.agreed(in: HTTPFields(), offered: false) == nil)
    }

    /// A server never masks its frames; a client that gets a masked one fails the connection
    /// (RFC 6455 §5.1), whatever the frame.
    @Test func aMaskedFrameIsAViolation() throws {
        let key = try #require(WebSocketMaskingKey([1, 2, 3, 4]))
        for opcode in [WebSocketOpcode.text, .binary, .ping, .connectionClose] {
            var reader = try UpstreamFrameReader(maxSize: 1_000, deflate: nil)
            var data = ByteBuffer(string: #"{"msg":"ping"}"#)
            data.webSocketMask(key)
            let frame = WebSocketFrame(fin: true, opcode: opcode, maskKey: key, data: data)
            #expect(throws: UpstreamTransportError.self, "\(opcode)") { try reader.read(frame) }
        }
    }

    /// A text message must be UTF-8 as a whole (RFC 6455 §8.1); a character may be split
    /// between fragments, and a binary message may hold any bytes.
    @Test func aTextMessageThatIsNotUTF8IsInvalidText() throws {
        var reader = try UpstreamFrameReader(maxSize: 1_000, deflate: DeflateAgreement())
        #expect(throws: UpstreamTransportError.invalidText) { try reader.read(Self.frame(.text, bytes: ByteBuffer(bytes: [0x7B, 0xFF, 0x7D]))) }
        reader = try UpstreamFrameReader(maxSize: 1_000, deflate: DeflateAgreement())
        let e = Array("é".utf8)
        #expect(try reader.read(Self.frame(.text, bytes: ByteBuffer(bytes: [0x22, e[0]]), fin: false)) == UpstreamFrameReader.Outcome.none)
        #expect(Self.text(try reader.read(Self.frame(.continuation, bytes: ByteBuffer(bytes: [e[1], 0x22])))) == "\"é\"")
        #expect(try reader.read(Self.frame(.binary, bytes: ByteBuffer(bytes: [0xFF]))) == .message(ByteBuffer(bytes: [0xFF])))
        // Checked once inflated: a compressed message's bytes are not text.
        var surrogate = ByteBuffer(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22])
        let compressed = try surrogate.compressStream(with: ZlibCompressor(algorithm: .deflate), flush: .sync, allocator: ByteBufferAllocator())
        let deflated = compressed.getSlice(at: compressed.readerIndex, length: compressed.readableBytes - 4)!
        #expect(throws: UpstreamTransportError.invalidText) { try reader.read(Self.frame(.text, bytes: deflated, rsv1: true)) }
    }

    /// The validator agrees with the standard library's on the edges of every rule and on
    /// random bytes (mostly ASCII, as DDP is, so the eight-byte step is taken and left).
    @Test func utf8ValidationAgreesWithTheStandardLibrary() {
        let edges: [[UInt8]] = [
            [], [0x00], [0x7F], [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0x9F, 0xBF],
            [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xED, 0xA0, 0x80], [0xEF, 0xBF, 0xBF], [0xF0, 0x8F, 0xBF, 0xBF],
            [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF],
            [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0xC3], Array("abcdefgh€ijklmnop".utf8), Array("abcdefg\u{10FFFF}".utf8)
        ]
        var dice = Dice(seed: 5)
        var cases = edges
        for _ in 0..<2_000 {
            cases.append((0..<dice.next(40)).map { _ in dice.next(4) == 0 ? UInt8(0x80 + dice.next(128)) : UInt8(dice.next(128)) })
        }
        for bytes in cases {
            let expected = String(validating: bytes, as: UTF8.self) != nil
            #expect(bytes.withUnsafeBytes { UTF8Validation.isValid($0) } == expected, "\(bytes)")
        }
    }

    /// Whatever frames come, in whatever order, the reader answers with an outcome or an error of
    /// its own type, never a trap; a message it hands on is within the limit. Seeded, bounded.
    @Test(arguments: 0..<8) func anyFramesAreReadOrRefusedNeverATrap(seed: Int) throws {
        var dice = Dice(seed: UInt64(seed) &+ 77)
        let compressor = try ZlibCompressor(algorithm: .deflate)
        let opcodes: [UInt8] = [0x0, 0x1, 0x2, 0x3, 0x8, 0x9, 0xA, 0xB, 0xF]
        var reader = try UpstreamFrameReader(maxSize: 200, deflate: seed % 2 == 0 ? DeflateAgreement() : nil)
        for _ in 0..<2_000 {
            let opcode = WebSocketOpcode(encodedWebSocketOpcode: opcodes[dice.next(opcodes.count)])!
            var data: ByteBuffer
            switch dice.next(3) {
            case 0: data = ByteBuffer(bytes: (0..<dice.next(300)).map { _ in UInt8(dice.next(256)) })
            case 1: data = try Self.deflate(String(repeating: "x", count: dice.next(400) + 1), with: compressor)
            default: data = ByteBuffer(string: #"{"msg":"ping"}"#)
            }
            if dice.next(4) == 0 { data = data.getSlice(at: data.readerIndex, length: data.readableBytes / 2) ?? data }
            let frame = WebSocketFrame(
                fin: dice.next(3) != 0, rsv1: dice.next(3) == 0, rsv2: dice.next(20) == 0, rsv3: dice.next(20) == 0,
                opcode: opcode, data: data)
            do {
                if case .message(let message) = try reader.read(frame) { #expect(message.readableBytes <= 200) }
            } catch {
                // A connection ends at its first error: a fresh reader, as a new connection has.
                reader = try UpstreamFrameReader(maxSize: 200, deflate: seed % 2 == 0 ? DeflateAgreement() : nil)
            }
        }
    }

    struct Dice {
        var seed: UInt64
        mutating func next(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(max(bound, 1)))
        }
    }

    // MARK: - The handler on a channel

    final class Received: @unchecked Sendable {
        var messages: [String] = []
    }

    /// An active channel with the handler, and what it handed on and how it ended.
    static func withHandler(
        maxSize: Int = 1_000, before: (any ChannelHandler)? = nil,
        _ body: (EmbeddedChannel, Received, EventLoopFuture<UpstreamTransportError?>) throws -> Void
    ) throws {
        let channel = EmbeddedChannel()
        if let before { try channel.pipeline.syncOperations.addHandler(before) }
        let received = Received()
        let ended = channel.eventLoop.makePromise(of: UpstreamTransportError?.self)
        let handler = UpstreamFrameHandler(reader: try UpstreamFrameReader(maxSize: maxSize, deflate: nil), ended: ended) {
            received.messages.append(String(buffer: $0))
        }
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try body(channel, received, ended.futureResult)
        // A close waits for the upstream's answer until its deadline.
        channel.close(promise: nil)
        channel.embeddedEventLoop.advanceTime(by: .seconds(3))
        _ = try? channel.finish()
    }

    /// How the WebSocket ended: `nil` while it has not (no blocking wait on the embedded loop).
    static func outcome(_ ended: EventLoopFuture<UpstreamTransportError?>) -> UpstreamTransportError?? {
        final class Box: @unchecked Sendable { var value: UpstreamTransportError?? }
        let box = Box()
        ended.whenSuccess { box.value = .some($0) }
        return box.value
    }

    /// What the handler wrote; the frames' data is not masked yet (NIO's encoder masks it).
    static func written(_ channel: EmbeddedChannel) throws -> [WebSocketFrame] {
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readOutbound(as: WebSocketFrame.self) { frames.append(frame) }
        return frames
    }

    @Test func messagesAreHandedOnAndSentAsMaskedTextFramesAndPingsAnswered() throws {
        try Self.withHandler { channel, received, ended throws in
            try channel.writeInbound(Self.frame(.text, #"{"msg":"connected","session":"s"}"#))
            #expect(received.messages == [#"{"msg":"connected","session":"s"}"#])
            try channel.writeOutbound(ByteBuffer(string: #"{"msg":"sub"}"#))
            try channel.writeInbound(Self.frame(.ping, "p"))
            let frames = try Self.written(channel)
            #expect(frames.map(\.opcode) == [.text, .pong])
            #expect(frames.allSatisfy { $0.fin && $0.maskKey != nil }, "a client's frames are masked")
            #expect(frames.map { String(buffer: $0.data) } == [#"{"msg":"sub"}"#, "p"])
            #expect(channel.isActive)
        }
    }

    @Test func closingTheChannelIsTheCloseHandshakeWithADeadline() throws {
        try Self.withHandler { channel, _, ended throws in
            channel.close(promise: nil)
            let sent = try Self.written(channel)
            #expect(sent.map(\.opcode) == [.connectionClose])
            var payload = sent.first?.data ?? ByteBuffer()
            #expect(payload.readWebSocketErrorCode() == .normalClosure)
            #expect(channel.isActive, "open until the upstream answers")
            try channel.writeInbound(Self.frame(.connectionClose, ""))
            #expect(!channel.isActive)
            #expect(Self.outcome(ended) == .some(nil), "ended, with no violation")
            #expect(try Self.written(channel).isEmpty, "no second close frame")
        }
        try Self.withHandler { channel, _, ended throws in
            channel.close(promise: nil)
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(1_999))
            #expect(channel.isActive)
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
            #expect(!channel.isActive, "closed at the deadline when the upstream never answers")
            #expect(Self.outcome(ended) == .some(nil), "ended, with no violation")
        }
    }

    /// The upstream's FIN, on a channel that allows half-closure (so it comes as an event), ends
    /// the WebSocket at once, not when a heartbeat finds the link silent.
    @Test func theUpstreamsEndOfStreamEndsTheConnection() throws {
        try Self.withHandler { channel, _, ended throws in
            channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(!channel.isActive)
            #expect(Self.outcome(ended) == .some(nil), "ended, with no violation")
        }
    }

    /// A socket whose close takes a while (NIOSSL waits for the peer's `close_notify`): the
    /// handler, stood in for by one that holds closes back.
    final class HeldClose: ChannelOutboundHandler {
        typealias OutboundIn = Any
        var reads = 0
        var holding = true
        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            if !holding { context.close(mode: mode, promise: promise) }
        }
        func read(context: ChannelHandlerContext) { reads += 1 }
    }

    @Test func nothingIsHandedOnOnceTheWebSocketHasEnded() throws {
        let held = HeldClose()
        try Self.withHandler(before: held) { channel, received, ended throws in
            try channel.writeInbound(Self.frame(.connectionClose, ""))
            #expect(Self.outcome(ended) == .some(nil), "ended, with no violation")
            #expect(channel.isActive, "the socket is still closing")
            try channel.writeInbound(Self.frame(.text, #"{"msg":"added"}"#))
            #expect(received.messages.isEmpty)
            held.holding = false
        }
    }

    @Test func whileTheSocketTakesNoMoreWritesNothingMoreIsRead() throws {
        let held = HeldClose()
        try Self.withHandler(before: held) { channel, _, _ throws in
            channel.read()
            #expect(held.reads == 1)
            channel.isWritable = false
            channel.read()
            #expect(held.reads == 1, "held back")
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            #expect(held.reads == 2, "read once the socket drains")
            held.holding = false
        }
    }

    @Test func anUpstreamCloseIsAnsweredAndEndsTheConnection() throws {
        try Self.withHandler { channel, _, ended throws in
            try channel.writeInbound(Self.frame(.connectionClose, ""))
            #expect(try Self.written(channel).map(\.opcode) == [.connectionClose])
            #expect(!channel.isActive)
            #expect(Self.outcome(ended) == .some(nil), "ended, with no violation")
        }
    }

    @Test func aViolationClosesWithItsCodeAndIsTheCause() throws {
        try Self.withHandler { channel, received, ended throws in
            try channel.writeInbound(Self.frame(.continuation, "x"))
            var payload = try Self.written(channel).first?.data ?? ByteBuffer()
            #expect(payload.readWebSocketErrorCode() == .protocolError)
            #expect(!channel.isActive)
            guard case .protocolViolation?? = Self.outcome(ended) else {
                Issue.record("not a protocol violation")
                return
            }
            try? channel.writeInbound(Self.frame(.text, "{}"))
            #expect(received.messages.isEmpty, "nothing is read after the violation")
        }
        // A masked frame is 1002; a text message that is not UTF-8 is 1007.
        let key = try #require(WebSocketMaskingKey([9, 8, 7, 6]))
        let bad: [(WebSocketFrame, WebSocketErrorCode)] = [
            (WebSocketFrame(fin: true, opcode: .text, maskKey: key, data: ByteBuffer(string: "{}")), .protocolError),
            (Self.frame(.text, bytes: ByteBuffer(bytes: [0xC0, 0xAF])), .dataInconsistentWithMessage)
        ]
        for (frame, code) in bad {
            try Self.withHandler { channel, received, ended throws in
                try channel.writeInbound(frame)
                var payload = try Self.written(channel).first?.data ?? ByteBuffer()
                #expect(payload.readWebSocketErrorCode() == code)
                #expect(!channel.isActive)
                #expect(received.messages.isEmpty)
                #expect(Self.outcome(ended).flatMap { $0 }?.closeCode == code)
            }
        }
        // One frame over the limit, as NIO's decoder reports it.
        try Self.withHandler(maxSize: 10) { channel, _, ended throws in
            channel.pipeline.fireErrorCaught(NIOWebSocketError.invalidFrameLength)
            var payload = try Self.written(channel).first?.data ?? ByteBuffer()
            #expect(payload.readWebSocketErrorCode() == .messageTooLarge)
            #expect(Self.outcome(ended) == .some(.messageTooLarge(limit: 10)))
        }
    }
}
