import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Testing

@testable import Bridge

/// The event-loop writer of an event stream, on an `EmbeddedChannel` with the HTTP encoder the
/// server has, installed as the server installs it (``StreamHandOff/install(_:on:opening:)``):
/// what it writes, when the socket does and does not take it, what it swallows, and how a
/// stream's end or its client's hang-up closes the connection.
@Suite struct StreamHandOffTests {
    typealias Parts = ChannelHandlerTests

    static func frame(_ text: String) -> ByteBuffer { ByteBuffer(string: "data: \(text)\n\n") }

    /// A connection as the server makes it (the HTTP encoder and codec, the front door), its
    /// stream installed with its head and `retry` line, which are read off already.
    static func withHandOff(limit: Int = 1 << 20, _ body: (EmbeddedChannel, StreamHandOff, EventStream) throws -> Void) throws {
        let channel = try connection()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let stream = EventStream(filter: StreamFilter(), limit: limit, loop: channel.eventLoop)
        #expect(StreamHandOff.install(stream, on: channel, opening: (Parts.eventStream(), ByteBuffer(string: "retry: 1\n\n"))))
        let handOff = try channel.pipeline.syncOperations.handler(type: StreamHandOff.self)
        #expect((try? channel.pipeline.syncOperations.handler(type: FrontDoor.self)) == nil, "the front door left")
        #expect(try chunks(channel).payloads == ["retry: 1\n\n"])
        try body(channel, handOff, stream)
    }

    /// An open connection with the server's HTTP handlers and a front door.
    static func connection(_ extra: [any ChannelHandler] = []) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handlers: [HTTPResponseEncoder(), HTTP1ToHTTPServerCodec(secure: false)] + extra)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        try channel.pipeline.syncOperations.addHandler(FrontDoor(.inert))
        return channel
    }

    /// The chunks written since the last call (a response head before them is skipped), and
    /// whether the last-chunk that ends the response came.
    static func chunks(_ channel: EmbeddedChannel) throws -> (payloads: [String], ended: Bool) {
        var wire = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { wire += String(buffer: buffer) }
        if wire.hasPrefix("HTTP/"), let headEnd = wire.range(of: "\r\n\r\n") { wire = String(wire[headEnd.upperBound...]) }
        var payloads: [String] = []
        var rest = Substring(wire)
        while let line = rest.range(of: "\r\n") {
            let size = try #require(Int(rest[..<line.lowerBound], radix: 16), "a chunk's size line: \(rest.prefix(40))")
            rest = rest[line.upperBound...]
            if size == 0 { return (payloads, true) }
            let bytes = Array(rest.utf8)
            try #require(bytes.count >= size + 2)
            payloads.append(String(decoding: bytes[..<size], as: UTF8.self))
            rest = Substring(String(decoding: bytes[(size + 2)...], as: UTF8.self))
        }
        return (payloads, false)
    }

    /// Frames queued while the socket takes nothing (past its high watermark), the loop having run.
    static func queueWhileNotWritable(_ texts: [String], _ channel: EmbeddedChannel, _ stream: EventStream) throws {
        _ = try chunks(channel)
        channel.isWritable = false
        for text in texts { stream.enqueue(frame(text)) }
        channel.embeddedEventLoop.run()
    }

    @Test func framesAreWrittenByTheLoopAsOneWritePerWakeUp() throws {
        try Self.withHandOff { channel, _, stream in
            var wakeups = Wakeups()
            stream.enqueue(Self.frame("1"), into: &wakeups)
            stream.enqueue(Self.frame("2"), into: &wakeups)
            let written1 = try Self.chunks(channel)
            #expect(written1.payloads.isEmpty, "nothing is written before the wake-up runs on the loop")
            wakeups.ring()
            channel.embeddedEventLoop.run()
            let written2 = try Self.chunks(channel)
            #expect(written2.payloads == ["data: 1\n\ndata: 2\n\n"])
        }
    }

    /// A reader that keeps up writes the event's own buffer (shared by every stream), not a copy.
    @Test func aLoneFrameIsWrittenAsTheSharedBufferItself() throws {
        let stream = EventStream(filter: StreamFilter(), limit: 1 << 20, loop: EmbeddedEventLoop())
        let frame = Self.frame("shared")
        stream.enqueue(frame)
        let taken = try #require(stream.take().bytes)
        let address = { (buffer: ByteBuffer) in buffer.withUnsafeReadableBytes { Int(bitPattern: $0.baseAddress) } }
        #expect(address(taken) == address(frame), "the frame was copied")
        stream.enqueue(Self.frame("1"))
        stream.enqueue(Self.frame("2"))
        #expect(stream.take().bytes.map { String(buffer: $0) } == "data: 1\n\ndata: 2\n\n", "several frames go out as one write")
    }

    @Test func aSocketThatIsNotWritableGetsItsBacklogInOneWriteWhenItDrains() throws {
        try Self.withHandOff { channel, _, stream in
            try Self.queueWhileNotWritable((1...3).map { "\($0)" }, channel, stream)
            let written3 = try Self.chunks(channel)
            #expect(written3.payloads.isEmpty, "written while the socket was past its high watermark")
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            let written4 = try Self.chunks(channel)
            #expect(written4.payloads == ["data: 1\n\ndata: 2\n\ndata: 3\n\n"])
        }
    }

    @Test func aReaderThatFallsTooFarBehindIsCutWithALastEventAndClosed() throws {
        try Self.withHandOff(limit: 64) { channel, _, stream in
            try Self.queueWhileNotWritable((1...10).map { "event number \($0)" }, channel, stream)
            #expect(channel.isActive, "cut before the socket took its last event")
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            let written = try Self.chunks(channel)
            let text = written.payloads.joined()
            #expect(text.contains("slow-consumer"), "\(text)")
            #expect(!text.contains("event number"), "the backlog was written, not dropped")
            #expect(written.ended, "the response was not ended")
            channel.embeddedEventLoop.run()
            #expect(!channel.isActive, "the connection stayed open after the stream ended")
        }
    }

    /// A reader cut while it reads nothing at all (its socket never takes its last event) does
    /// not hold its connection: it closes after ``StreamHandOff/lastEventDeadline``.
    @Test func aReaderCutWhileItReadsNothingIsClosedAfterTheDeadline() throws {
        try Self.withHandOff(limit: 64) { channel, _, stream in
            try Self.queueWhileNotWritable((1...10).map { "event number \($0)" }, channel, stream)
            #expect(channel.isActive)
            channel.embeddedEventLoop.advanceTime(by: .seconds(9))
            #expect(channel.isActive, "closed before the deadline")
            channel.embeddedEventLoop.advanceTime(by: .seconds(1))
            #expect(!channel.isActive, "a reader that takes nothing held its connection past the deadline")
        }
    }

    /// The router's writer of a stream it handed over never ends the response (the stream's end
    /// does); what the client sends on a stream reaches no one.
    @Test func anEndFromElsewhereIsSwallowedAndTheClientsRequestsDropped() throws {
        try Self.withHandOff { channel, _, stream in
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            let written5 = try Self.chunks(channel)
            #expect(written5.payloads.isEmpty && !written5.ended, "the response was ended under the stream")
            #expect(channel.isActive)
            try channel.writeInbound(HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/healthz")))
            try channel.writeInbound(HTTPServerRequestPart.end(nil))
            channel.embeddedEventLoop.run()
            let written6 = try Self.chunks(channel)
            #expect(written6.payloads.isEmpty && !written6.ended, "a request on a stream was answered")
            stream.enqueue(Self.frame("after"))
            channel.embeddedEventLoop.run()
            let written7 = try Self.chunks(channel)
            #expect(written7.payloads == ["data: after\n\n"])
        }
    }

    /// A client that half-closes its side has hung up: the connection closes now, not at the
    /// stream's next write (a heartbeat away), so its close frees what the stream held.
    @Test func aHangUpClosesTheConnectionAtOnce() throws {
        try Self.withHandOff { channel, _, _ in
            channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            channel.embeddedEventLoop.run()
            #expect(!channel.isActive)
        }
    }

    @Test func theStreamsEndEndsTheResponseAndClosesTheConnection() throws {
        try Self.withHandOff { channel, _, stream in
            stream.finish(with: Array("data: bye\n\n".utf8))
            channel.embeddedEventLoop.run()
            let written8 = try Self.chunks(channel)
            #expect(written8.payloads == ["data: bye\n\n"] && written8.ended, "the last event then the end")
            channel.embeddedEventLoop.run()
            #expect(!channel.isActive)
        }
    }

    @Test func aConnectionIsTakenOverOnceAndNotWhenClosed() throws {
        try Self.withHandOff { channel, handOff, _ in
            #expect(
                !handOff.adopt(EventStream(filter: StreamFilter(), limit: 1024, loop: channel.eventLoop)), "a second stream took the same connection")
            #expect(
                !StreamHandOff.install(EventStream(filter: StreamFilter(), limit: 1024, loop: channel.eventLoop), on: channel),
                "a second writer was installed")
        }
        let channel = try Self.connection()
        channel.close(promise: nil)
        channel.embeddedEventLoop.run()
        #expect(
            !StreamHandOff.install(EventStream(filter: StreamFilter(), limit: 1024, loop: channel.eventLoop), on: channel),
            "a closed connection was taken over")
    }

    // MARK: - A GET's own chunks

    /// The writer frames a `GET`'s frames as chunks itself and writes them past the HTTP
    /// handlers; the head goes through them, then they go, and the writer frames the last event
    /// and the end too. The bytes on the
    /// wire are one well-formed chunked response, in order, whichever way each part went.
    @Test func aGetsFramesAreChunkedByTheWriterAndTheResponseStaysWellFormed() throws {
        let passing = BodyCounter()
        let channel = try Self.connection([passing])
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let stream = EventStream(filter: StreamFilter(), limit: 1 << 20, loop: channel.eventLoop)
        let large = String(repeating: "x", count: StreamHandOff.copyLimit + 100)
        let frames = ["data: 1\n\n", "data: \(large)\n\n", "data: 2\n\n"]
        #expect(StreamHandOff.install(stream, on: channel, opening: (Parts.eventStream(), ByteBuffer(string: "retry: 1\n\n"))))
        for frame in frames {
            stream.enqueue(ByteBuffer(string: frame))
            channel.embeddedEventLoop.run()
        }
        stream.finish(with: Array("event: end\n\n".utf8))
        channel.embeddedEventLoop.run()
        var wire = ByteBuffer()
        while var part = try channel.readOutbound(as: ByteBuffer.self) { wire.writeBuffer(&part) }
        let bytes = Array(wire.readableBytesView)
        let crlf: [UInt8] = [0x0D, 0x0A]
        /// The index of the next CRLF at or after `from`.
        func lineEnd(_ from: Int) -> Int? {
            (from..<max(from, bytes.count - 1)).first { bytes[$0] == 0x0D && bytes[$0 + 1] == 0x0A }
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let headEnd = try #require((0..<bytes.count - 3).first { Array(bytes[$0..<$0 + 4]) == crlf + crlf })
        #expect(String(decoding: bytes[..<headEnd], as: UTF8.self).lowercased().contains("transfer-encoding: chunked"), "\(text.prefix(300))")
        // Each chunk: its size in hex, CRLF, the bytes, CRLF; a zero-size chunk ends the body.
        var at = headEnd + 4
        var body: [UInt8] = []
        var chunks = 0
        while true {
            let end = try #require(lineEnd(at))
            let sizeLine = String(decoding: bytes[at..<end], as: UTF8.self)
            let size = try #require(Int(sizeLine, radix: 16), "a chunk's size line: \(sizeLine)")
            at = end + 2
            if size == 0 {
                #expect(Array(bytes[at...]) == crlf, "nothing after the last chunk")
                break
            }
            try #require(at + size + 2 <= bytes.count)
            body += bytes[at..<at + size]
            #expect(Array(bytes[at + size..<at + size + 2]) == crlf, "a chunk's bytes end with CRLF")
            at += size + 2
            chunks += 1
        }
        let expected = "retry: 1\n\n" + frames.joined() + "event: end\n\n"
        #expect(body == Array(expected.utf8))
        #expect(chunks == 5, "one chunk per write: the opening, three frames, the last event")
        #expect(passing.bodies == 1, "only the opening went through the HTTP handlers (then they were gone)")
    }

    /// On the bridge's own pipeline (``BridgeChildChannel``'s handlers), a stream that takes the
    /// connection leaves only the encoder and its writer: the decoder, the version tap, the HTTP
    /// types codec and the connection-state handler go (an idle reader holds less). What the
    /// client sends afterwards, a request or bytes that are none, is dropped, and the stream's
    /// end is still framed: its last event, the empty chunk, the close.
    @Test func aStreamLeavesOnlyItsWriterAndTheEncoderInThePipeline() throws {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        let operations = channel.pipeline.syncOperations
        try operations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        try operations.addHandler(HTTPVersionTap())
        try operations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try operations.addHandler(HTTPConnectionStateHandler(idleTimeout: .seconds(30), logger: Logger(label: "test")))
        try operations.addHandler(FrontDoor(.inert))
        let stream = EventStream(filter: StreamFilter(), limit: 1 << 20, loop: channel.eventLoop)
        #expect(StreamHandOff.install(stream, on: channel, opening: (Parts.eventStream(), ByteBuffer(string: "retry: 1\n\n"))))
        // The decoder leaves in a job of the loop, once it has dropped what it held.
        channel.embeddedEventLoop.run()
        #expect((try? operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)) == nil)
        #expect((try? operations.handler(type: HTTPVersionTap.self)) == nil)
        #expect((try? operations.handler(type: HTTP1ToHTTPServerCodec.self)) == nil)
        #expect((try? operations.handler(type: HTTPConnectionStateHandler.self)) == nil)
        #expect((try? operations.handler(type: FrontDoor.self)) == nil)
        #expect((try? operations.handler(type: HTTPResponseEncoder.self)) != nil)
        _ = try Self.chunks(channel)
        try channel.writeInbound(ByteBuffer(string: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n\u{0}\u{1}not http"))
        stream.enqueue(ByteBuffer(string: "data: 1\n\n"))
        channel.embeddedEventLoop.run()
        stream.finish(with: Array("event: end\n\n".utf8))
        channel.embeddedEventLoop.run()
        let written = try Self.chunks(channel)
        #expect(written.payloads == ["data: 1\n\n", "event: end\n\n"] && written.ended, "\(written)")
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }

    /// Counts the response bodies that pass it on their way to the socket.
    final class BodyCounter: ChannelOutboundHandler {
        typealias OutboundIn = HTTPResponsePart
        typealias OutboundOut = HTTPResponsePart
        private(set) var bodies = 0

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if case .body = unwrapOutboundIn(data) { bodies += 1 }
            context.write(data, promise: promise)
        }
    }

    @Test func aChunksSizeIsWrittenInHex() {
        for value in [1, 9, 10, 15, 16, 255, 256, 4096, 70_000, Int.max] {
            var buffer = ByteBuffer()
            StreamHandOff.writeHex(value, into: &buffer)
            #expect(String(buffer: buffer) == String(value, radix: 16))
        }
    }
}

extension EventStream {
    /// Adds one frame and rings its writer if due (what a feed's turn does for a stream, one
    /// frame at a time).
    func enqueue(_ frame: ByteBuffer) {
        var wakeups = Wakeups()
        enqueue(frame, into: &wakeups)
        wakeups.ring()
    }
}
