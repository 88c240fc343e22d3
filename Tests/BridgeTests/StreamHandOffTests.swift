import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Testing

@testable import Bridge

/// The event-loop writer of an event stream, on an `EmbeddedChannel`: what it writes, when the
/// socket does and does not take it, what it swallows of the request loop's writer, and how a
/// stream's end closes the connection.
@Suite struct StreamHandOffTests {
    typealias Parts = ChannelHandlerTests

    static func frame(_ text: String) -> ByteBuffer { ByteBuffer(string: "data: \(text)\n\n") }

    static func bodies(_ parts: [HTTPResponsePart]) -> [String] {
        parts.compactMap { part in
            if case .body(let bytes) = part { return String(buffer: bytes) }
            return nil
        }
    }

    /// A channel whose stream the writer has taken over after its head was written.
    static func withHandOff(
        limit: Int = 1 << 20, _ body: (EmbeddedChannel, StreamHandOff, EventStream, ChannelHandlerTests.Recorder) throws -> Void
    ) throws {
        let handOff = StreamHandOff()
        let stream = EventStream(filter: StreamFilter(), limit: limit)
        try Parts.withChannel([handOff]) { channel, recorder in
            try channel.writeOutbound(HTTPResponsePart.head(Parts.eventStream()))
            #expect(handOff.adopt(stream))
            #expect(handOff.takeOver.isTaken)
            try body(channel, handOff, stream, recorder)
        }
    }

    /// Frames queued while the socket takes nothing (past its high watermark), the loop having run.
    static func queueWhileNotWritable(_ texts: [String], _ channel: EmbeddedChannel, _ stream: EventStream) throws {
        _ = try Parts.written(channel)
        channel.isWritable = false
        for text in texts { stream.enqueue(frame(text)) }
        channel.embeddedEventLoop.run()
    }

    @Test func framesAreWrittenByTheLoopAsOneWritePerWakeUp() throws {
        try Self.withHandOff { channel, _, stream, _ in
            #expect(try Self.bodies(Parts.written(channel)) == [])
            var wakeups = Wakeups()
            stream.enqueue(Self.frame("1"), into: &wakeups)
            stream.enqueue(Self.frame("2"), into: &wakeups)
            #expect(try Parts.written(channel).isEmpty, "nothing is written before the wake-up runs on the loop")
            wakeups.ring()
            channel.embeddedEventLoop.run()
            let parts = try Parts.written(channel)
            #expect(Self.bodies(parts) == ["data: 1\n\ndata: 2\n\n"], "\(parts)")
        }
    }

    /// A reader that keeps up writes the event's own buffer (shared by every stream), not a copy.
    @Test func aLoneFrameIsWrittenAsTheSharedBufferItself() throws {
        let stream = EventStream(filter: StreamFilter(), limit: 1 << 20)
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
        try Self.withHandOff { channel, _, stream, _ in
            try Self.queueWhileNotWritable((1...3).map { "\($0)" }, channel, stream)
            #expect(try Parts.written(channel).isEmpty, "written while the socket was past its high watermark")
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            #expect(try Self.bodies(Parts.written(channel)) == ["data: 1\n\ndata: 2\n\ndata: 3\n\n"])
        }
    }

    @Test func aReaderThatFallsTooFarBehindIsCutWithALastEventAndClosed() throws {
        try Self.withHandOff(limit: 64) { channel, _, stream, _ in
            try Self.queueWhileNotWritable((1...10).map { "event number \($0)" }, channel, stream)
            #expect(channel.isActive, "cut before the socket took its last event")
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
            let parts = try Parts.written(channel)
            let text = Self.bodies(parts).joined()
            #expect(text.contains("slow-consumer"), "\(text)")
            #expect(!text.contains("event number"), "the backlog was written, not dropped")
            #expect(parts.last.map { if case .end = $0 { true } else { false } } == true, "the response was not ended")
            channel.embeddedEventLoop.run()
            #expect(!channel.isActive, "the connection stayed open after the stream ended")
        }
    }

    /// A reader cut while it reads nothing at all (its socket never takes its last event) does
    /// not hold its connection: it closes after ``StreamHandOff/lastEventDeadline``.
    @Test func aReaderCutWhileItReadsNothingIsClosedAfterTheDeadline() throws {
        try Self.withHandOff(limit: 64) { channel, _, stream, _ in
            try Self.queueWhileNotWritable((1...10).map { "event number \($0)" }, channel, stream)
            #expect(channel.isActive)
            channel.embeddedEventLoop.advanceTime(by: .seconds(9))
            #expect(channel.isActive, "closed before the deadline")
            channel.embeddedEventLoop.advanceTime(by: .seconds(1))
            #expect(!channel.isActive, "a reader that takes nothing held its connection past the deadline")
        }
    }

    @Test func theRequestLoopsEndAndHalfCloseAreSwallowedAndItsReadsDropped() throws {
        try Self.withHandOff { channel, _, stream, recorder in
            _ = try Parts.written(channel)
            // What the request loop's writer sends once the route has handed the stream over.
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            let halfClose = channel.embeddedEventLoop.makePromise(of: Void.self)
            channel.close(mode: .output, promise: halfClose)
            #expect(try Parts.written(channel).isEmpty, "the response was ended under the stream")
            #expect(channel.isActive)
            // A client has nothing more to say on a stream: it does not reach the router.
            try Parts.deliver(Parts.parts(Parts.request(.get, "/v1/session")), to: channel)
            #expect(recorder.parts.isEmpty)
            // The stream goes on.
            stream.enqueue(Self.frame("after"))
            channel.embeddedEventLoop.run()
            #expect(try Self.bodies(Parts.written(channel)) == ["data: after\n\n"])
        }
    }

    @Test func theStreamsEndEndsTheResponseAndClosesTheConnection() throws {
        try Self.withHandOff { channel, _, stream, _ in
            _ = try Parts.written(channel)
            stream.finish(with: Array("data: bye\n\n".utf8))
            channel.embeddedEventLoop.run()
            let parts = try Parts.written(channel)
            #expect(Self.bodies(parts) == ["data: bye\n\n"])
            #expect(parts.count == 2, "the last event then the end: \(parts)")
            channel.embeddedEventLoop.run()
            #expect(!channel.isActive)
        }
    }

    @Test func aConnectionIsTakenOverOnceAndNotWhenClosed() throws {
        try Self.withHandOff { channel, handOff, _, _ in
            _ = try Parts.written(channel)
            #expect(!handOff.adopt(EventStream(filter: StreamFilter(), limit: 1024)), "a second stream took the same connection")
        }
        let handOff = StreamHandOff()
        try Parts.withChannel([handOff]) { channel, _ in
            channel.close(promise: nil)
            channel.embeddedEventLoop.run()
            #expect(!handOff.adopt(EventStream(filter: StreamFilter(), limit: 1024)), "a closed connection was taken over")
            #expect(!handOff.takeOver.isTaken)
        }
    }

    // MARK: - A GET's own chunks

    /// The writer frames a `GET`'s frames as chunks itself and writes them past the HTTP
    /// handlers; the head, the last event and the end go through the encoder. The bytes on the
    /// wire are one well-formed chunked response, in order, whichever way each part went.
    @Test func aGetsFramesAreChunkedByTheWriterAndTheResponseStaysWellFormed() throws {
        let handOff = StreamHandOff()
        let stream = EventStream(filter: StreamFilter(), limit: 1 << 20)
        let passing = BodyCounter()
        let channel = EmbeddedChannel(handlers: [HTTPResponseEncoder(), HTTP1ToHTTPServerCodec(secure: false), passing])
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        let operations = channel.pipeline.syncOperations
        try operations.addHandler(StreamAnchor(takeOver: StreamTakeOver()))
        let large = String(repeating: "x", count: StreamHandOff.copyLimit + 100)
        let frames = ["data: 1\n\n", "data: \(large)\n\n", "data: 2\n\n"]
        #expect(StreamAnchor.install(stream, on: channel, opening: (Parts.eventStream(), ByteBuffer(string: "retry: 1\n\n"))))
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
        #expect(passing.bodies == 2, "only the opening and the last event went through the HTTP handlers")
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
