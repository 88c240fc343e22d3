import DDPClient
import HTTPTypes
import HummingbirdCore
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Synchronization
import Timing

/// The event-loop writer of an event stream. Once the route has accepted a stream and written
/// its head, it hands the stream here (``adopt(_:)``) and returns; from then on the connection
/// belongs to this handler, on its channel's event loop, with no Swift task behind it:
///
/// - its loop's feed hands it each turn's shared bytes (``feed(_:_:)``), written at once when
///   nothing waits before them; the stream's doorbell (a job on this loop) writes what waits in
///   its buffer, as one write;
/// - while the socket is not writable (the channel is past its high watermark) nothing is taken
///   from the stream, so its frames wait in the stream's bounded buffer, and a reader that lets
///   that overflow is cut with a last event (``EventStream``); when the socket drains
///   (`channelWritabilityChanged`), everything pending goes out in one write;
/// - a prelude (a replay, a snapshot) is taken chunk by chunk, each only while the socket is
///   writable: a snapshot of any size reaches a reader at its own pace;
/// - it keeps reading the socket (and drops what it reads) so a hang-up is seen at once: the
///   client's half-close closes the connection, whose close ends the stream;
/// - when the stream ends (its ending frame), the response is ended and the connection closed.
/// - a `GET`'s frames skip the HTTP handlers: the writer frames each write as a chunk itself and
///   writes it to the socket's end of the pipeline (the handlers between, Hummingbird's and
///   NIO's, cost more per write than the socket's own work did for 10,000 readers of a change).
///   The response's head goes through them all as any response's does; then they go
///   (``shed(_:)``), and the writer frames the stream's last event and the body's end too.
///
/// Put in the front door's place when a stream takes the connection (``install(_:on:opening:)``):
/// other requests never pass through it. Used only on its channel's event loop.
final class StreamHandOff: ChannelDuplexHandler, RemovableChannelHandler, StreamSink {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The HTTP encoder's context, through which this writer writes the chunks it frames (`nil`:
    /// it writes bodies through the HTTP handlers, which frame them).
    private var encoder: ChannelHandlerContext?
    private var context: ChannelHandlerContext?
    /// The context's channel, kept while the handler is in the pipeline (read for every turn of
    /// a feed: without a trip through the pipeline).
    private var channel: (any Channel)?
    private var stream: EventStream?
    /// A stream has the connection.
    private var taken = false
    private var ended = false

    /// The body is not framed in chunks (an HTTP/1.0 client's): its bytes go as they are, and
    /// the connection's close ends it.
    private let closeDelimited: Bool
    /// The HTTP handlers are gone (``shed(_:)``): the response's end is this writer's to frame.
    private var shed = false

    init(encoder: ChannelHandlerContext? = nil, closeDelimited: Bool = false) {
        self.encoder = encoder
        self.closeDelimited = closeDelimited
    }

    /// Puts `stream`'s writer in the front door's place and hands it the connection; `false`
    /// when the connection is gone or has a stream already (the door has left). On the channel's
    /// event loop.
    ///
    /// `opening`: the response's head and first bytes, for a stream opened by the front door
    /// (the request never reached the router): the writer writes them, through every handler
    /// that looks at a response, as a routed answer's are.
    static func install(_ stream: EventStream, on channel: any Channel, opening: (head: HTTPResponse, body: ByteBuffer)? = nil) -> Bool {
        // A stream lives on its connection's loop (``EventStream``): one made for another is refused.
        guard stream.loop === channel.eventLoop else { return false }
        let operations = channel.pipeline.syncOperations
        guard let door = try? operations.handler(type: FrontDoor.self) else { return false }
        let encoder = BridgeChildChannel.encoderContext(operations)
        // An HTTP/1.0 client's body is not chunked: it ends with the connection.
        let closeDelimited = (try? operations.handler(type: HTTPVersionTap.self))?.answersHTTP10 ?? false
        let writer = StreamHandOff(encoder: encoder, closeDelimited: closeDelimited)
        do { try operations.addHandler(writer, position: .after(door)) } catch { return false }
        if let opening { writer.open(opening.head, opening.body) }
        guard writer.adopt(stream) else { return false }
        // What only requests need goes: an idle reader holds less.
        operations.removeHandler(door, promise: nil)
        if encoder != nil { writer.shed(operations) }
        return true
    }

    /// Once the stream has the connection and its head is written, the HTTP handlers have
    /// nothing left to do for it: the writer frames every byte after the head itself and writes
    /// it through the encoder's context (past them all), and what the client sends is dropped.
    /// So they go, and an idle reader's pipeline is the encoder (the writer's way to the socket:
    /// nothing is written through it any more) and this writer: the request decoder (and its
    /// parser), the version tap, the HTTP types codec and the connection-state handler (its idle
    /// timeout is not a stream's: heartbeats keep it busy, and a stream ends on its own terms)
    /// are gone. The decoder goes last: what it still holds of a request is dropped.
    private func shed(_ operations: ChannelPipeline.SynchronousOperations) {
        func remove<Handler: RemovableChannelHandler>(_ type: Handler.Type) {
            if let handler = try? operations.handler(type: type) { operations.removeHandler(handler, promise: nil) }
        }
        remove(HTTPConnectionStateHandler.self)
        remove(HTTP1ToHTTPServerCodec.self)
        remove(HTTPVersionTap.self)
        remove(ByteToMessageHandler<HTTPRequestDecoder>.self)
        shed = true
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        channel = context.channel
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
        self.context = nil
        channel = nil
        encoder = nil
    }

    /// Takes the connection over for `stream` (its head and first frames written already, by the
    /// router's writer, whose writes reach the loop before this call does, or by ``open(_:_:)``).
    /// `false` when the connection is gone or taken already: the caller ends the stream then.
    func adopt(_ stream: EventStream) -> Bool {
        guard let context, !taken, context.channel.isActive else { return false }
        self.stream = stream
        clock = stream.clock
        taken = true
        let waker = StreamWaker(loop: context.eventLoop, writer: NIOLoopBound(self as any StreamSink, eventLoop: context.eventLoop))
        stream.setWaker(waker)
        try? context.channel.syncOptions?.setOption(.socketOption(.so_sndbuf), value: Self.socketSendBuffer)
        context.read()
        return true
    }

    /// Writes a response's head and first bytes (a stream opened on the loop).
    func open(_ head: HTTPResponse, _ body: ByteBuffer) {
        guard let context else { return }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.body(body)), promise: nil)
    }

    /// Writes what the stream has, while the socket takes it; ends the response with the stream.
    /// A step of a prelude (a page of the log, a slice of a snapshot's walk) is one job of the
    /// loop: the next step is a job due a moment later, so the loop's other connections get
    /// their turn between.
    func drain() {
        guard let context, let stream, !ended else { return }
        guard context.channel.isWritable else {
            // A reader cut while its socket takes nothing (it stopped reading) may never take its
            // last event: its connection closes after ``lastEventDeadline`` all the same. One
            // that takes nothing of its stream's start is cut after the stall timeout.
            if stream.hasEnded {
                closeLater(context.channel)
            } else if stream.hasPrelude {
                armStallTimer(context, stream)
            }
            return
        }
        let (bytes, ending, more) = stream.take()
        if let bytes { write(bytes, context: context) }
        if let ending {
            end(with: ending, context: context)
            return
        }
        if bytes != nil { (encoder ?? context).flush() }
        if more {
            // Not `execute`: a loop runs the jobs queued by its jobs before it looks at its
            // sockets again, so a chain of steps would hold them all. A job due a moment later
            // lets the loop poll its sockets (and accept connections) between two steps.
            let writer = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: Self.stepPause) { writer.value.drain() }
        }
    }

    /// A turn's frames from a loop's feed (``LoopFeed``), the same buffers for every reader of
    /// the loop: written now, framed once for all of them as an HTTP/1.1 chunk (the turn keeps
    /// the first framing), when the socket takes them, nothing waits before them in the stream
    /// and they are within its limit; else they join the stream's buffer, drained now if the
    /// writer was waiting for them.
    func feed(_ stream: EventStream, _ turn: LoopFeed.Turn) {
        let writable = self.stream === stream && !ended && (channel?.isWritable ?? false)
        switch stream.offer(turn.frames, bytes: turn.bytes, count: turn.count, writable: writable) {
        case .write:
            guard let context else { return }
            if let encoder {
                for piece in closeDelimited ? turn.frames : turn.framed(by: Self.chunk(_:bytes:)) { encoder.write(NIOAny(piece), promise: nil) }
                encoder.flush()
            } else {
                for frame in turn.frames { context.write(wrapOutboundOut(.body(frame)), promise: nil) }
                context.flush()
            }
        case .wake: drain()
        case .wait: break
        }
    }

    /// Writes a body's bytes: as a chunk past the HTTP handlers for a writer of its own chunks,
    /// else through them.
    private func write(_ bytes: ByteBuffer, context: ChannelHandlerContext) {
        guard let encoder else {
            context.write(wrapOutboundOut(.body(bytes)), promise: nil)
            return
        }
        if closeDelimited { encoder.write(NIOAny(bytes), promise: nil) } else { Self.writeChunk(bytes, to: encoder) }
    }

    /// Writes `bytes` as one HTTP/1.1 chunk through the encoder's `context` (to the handlers
    /// before it). A small one is copied into a single buffer with its framing (one write, one
    /// iovec for the socket); a large one (a prelude's page) is written between its framing.
    static func writeChunk(_ bytes: ByteBuffer, to context: ChannelHandlerContext) {
        let count = bytes.readableBytes
        guard count > 0 else { return }
        guard count > copyLimit else {
            context.write(NIOAny(chunk(bytes)), promise: nil)
            return
        }
        var head = allocator.buffer(capacity: 20)
        writeHex(count, into: &head)
        head.writeStaticString("\r\n")
        context.write(NIOAny(head), promise: nil)
        context.write(NIOAny(bytes), promise: nil)
        context.write(NIOAny(ByteBuffer(staticString: "\r\n")), promise: nil)
    }

    /// `bytes` (not empty) framed as one HTTP/1.1 chunk, in a buffer of its own (copied): a small
    /// write's.
    static func chunk(_ bytes: ByteBuffer) -> ByteBuffer {
        var chunk = allocator.buffer(capacity: bytes.readableBytes + 20)
        writeHex(bytes.readableBytes, into: &chunk)
        chunk.writeStaticString("\r\n")
        chunk.writeImmutableBuffer(bytes)
        chunk.writeStaticString("\r\n")
        return chunk
    }

    /// `pieces` (`bytes` in all, not zero) framed as one HTTP/1.1 chunk: one buffer with its framing
    /// when they are one small piece, else the chunk's size line, the pieces themselves, and CRLF.
    static func chunk(_ pieces: [ByteBuffer], bytes: Int) -> [ByteBuffer] {
        guard bytes > 0 else { return [] }
        if pieces.count == 1, bytes <= copyLimit { return [chunk(pieces[0])] }
        var head = allocator.buffer(capacity: 20)
        writeHex(bytes, into: &head)
        head.writeStaticString("\r\n")
        return [head] + pieces + [ByteBuffer(staticString: "\r\n")]
    }

    /// NIO's allocator, without reaching it through the channel (a retain per write).
    private static let allocator = ByteBufferAllocator()

    /// Writes up to this many bytes into a chunk's own buffer; more are written as they are.
    static let copyLimit = 4096

    /// `value` (positive) in lower-case hexadecimal digits, as a chunk's size line has it.
    static func writeHex(_ value: Int, into buffer: inout ByteBuffer) {
        let digits = (Int.bitWidth - value.leadingZeroBitCount + 3) / 4
        for shift in stride(from: (max(digits, 1) - 1) * 4, through: 0, by: -4) {
            let nibble = UInt8((value >> shift) & 0xF)
            buffer.writeInteger(nibble < 10 ? 0x30 + nibble : 0x57 + nibble)
        }
    }

    /// The pause between two steps of a prelude: the loop polls its sockets meanwhile.
    static let stepPause: TimeAmount = .microseconds(20)

    /// Cuts a stream whose start waits on a reader that takes nothing: armed while the socket is
    /// not writable, disarmed when it drains.
    private var stallTimer: BridgeClock.Timer?
    /// The stream's clock (kept for the close after the stream is released).
    private var clock = BridgeClock.system

    private func armStallTimer(_ context: ChannelHandlerContext, _ stream: EventStream) {
        guard stallTimer == nil else { return }
        let writer = NIOLoopBound(self, eventLoop: context.eventLoop)
        let timeout = stream.stallTimeout
        stallTimer = clock.schedule(after: timeout, on: context.eventLoop) {
            writer.value.stallTimer = nil
            stream.finish(with: EventStream.stalled(timeout))
        }
    }

    /// The send buffer the kernel keeps for a stream's socket: without a bound it grows to
    /// megabytes for a reader that does not read (Linux tunes it up to `tcp_wmem`'s maximum).
    static let socketSendBuffer: SocketOptionValue = 128 << 10

    /// How long a stream's last event may take to reach its reader before the connection
    /// closes anyway (a reader cut for not reading may never take it).
    static let lastEventDeadline: Duration = .seconds(10)

    /// Writes the last event and the response's end, then closes: once they are written, or
    /// after ``lastEventDeadline``.
    private func end(with ending: [UInt8], context: ChannelHandlerContext) {
        ended = true
        release()
        let written = context.eventLoop.makePromise(of: Void.self)
        if shed, let encoder {
            // The last chunk, then the empty one that ends a chunked body (a close-delimited body
            // ends with the close).
            write(ByteBuffer(bytes: ending), context: context)
            encoder.writeAndFlush(NIOAny(ByteBuffer(staticString: closeDelimited ? "" : "0\r\n\r\n")), promise: written)
        } else {
            context.write(wrapOutboundOut(.body(ByteBuffer(bytes: ending))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        }
        let channel = context.channel
        closeLater(channel)
        written.futureResult.whenComplete { _ in channel.close(promise: nil) }
    }

    /// The connection's close after ``lastEventDeadline``, armed once.
    private var closeTimer: BridgeClock.Timer?

    private func closeLater(_ channel: any Channel) {
        guard closeTimer == nil else { return }
        closeTimer = clock.schedule(after: Self.lastEventDeadline, on: channel.eventLoop) { channel.close(promise: nil) }
    }

    /// Drops the stream (and its doorbell, which holds this handler).
    private func release() {
        stream?.setWaker(nil)
        stream = nil
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if stream != nil, context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
            drain()
        }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A stream's client has nothing more to say; what it sends is dropped.
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Read on, so the client's hang-up arrives.
        context.read()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The client hung up (half-closed): the connection closes now, not at the next write
        // (a heartbeat away), and its close ends the stream and frees what it held.
        if let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeTimer?.cancel()
        stallTimer?.cancel()
        release()
        context.fireChannelInactive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // The stream's response ends when the stream does, here: an end from elsewhere (the
        // router's writer of a stream it handed over) is not the stream's. Once the HTTP handlers
        // are gone, nothing from elsewhere is written at all: what is left toward the socket
        // takes only this writer's bytes.
        if shed {
            promise?.succeed()
            return
        }
        if taken, case .end = unwrapOutboundIn(data) {
            promise?.succeed()
            return
        }
        context.write(data, promise: promise)
    }
}
