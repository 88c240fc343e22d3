import NIOCore
import NIOWebSocket

/// The upstream WebSocket's data path, a handler on the connection's event loop (no task):
/// frames in through ``UpstreamFrameReader``, each whole message handed to `received` on the
/// loop; DDP messages out as masked text frames (a client's frames are masked, RFC 6455 §5.3);
/// pings answered; a close answered and the connection closed. Closing the channel while the
/// WebSocket is open is the close handshake: a close frame goes out, and the channel closes
/// when the upstream's close frame comes back, or after `closeTimeout` (a TLS connection closed
/// before the peer's answer waits for the peer's `close_notify`). Where the handshake is, and
/// what each event does to it, is ``CloseHandshake``; this handler does what it says.
///
/// `ended` is completed when the WebSocket ends (the channel closing, or gone): with the
/// violation that ended it, if one did; nothing is handed on after it. Its owner does not wait
/// for the socket's last bytes (NIOSSL waits up to 5 s for a peer's `close_notify` before the
/// channel goes). The upstream's end of the stream (its FIN) ends the WebSocket at once: the
/// channel closes on it, or, on a channel that allows half-closure, the handler closes it.
/// While the socket takes no more writes, the handler reads no more (so an upstream that sends
/// and never reads cannot queue pongs without bound).
final class UpstreamFrameHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = WebSocketFrame

    /// While the upstream's close frame is awaited: the close asked for (completed when the
    /// channel closes) and the deadline for the answer.
    struct WaitingClose {
        let closed: EventLoopPromise<Void>
        let deadline: Scheduled<Void>
    }

    private var reader: UpstreamFrameReader
    private let received: (ByteBuffer) -> Void
    private let ended: EventLoopPromise<UpstreamTransportError?>
    private let closeTimeout: TimeAmount
    private var handshake = CloseHandshake<WaitingClose>()
    /// A read held back while the socket takes no more writes.
    private var readHeld = false

    init(
        reader: UpstreamFrameReader, closeTimeout: Duration = .seconds(2), ended: EventLoopPromise<UpstreamTransportError?>,
        received: @escaping (ByteBuffer) -> Void
    ) {
        self.reader = reader
        self.closeTimeout = TimeAmount(closeTimeout)
        self.ended = ended
        self.received = received
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard handshake.isReading else { return }
        do {
            switch try reader.read(unwrapInboundIn(data)) {
            case .none:
                break
            case .message(let message):
                received(message)
            case .pong(let payload):
                context.writeAndFlush(wrapOutboundOut(Self.frame(.pong, payload)), promise: nil)
            case .close:
                run(handshake.receivedClose(), context: context)
            }
        } catch {
            run(handshake.violated(error), context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error as? NIOWebSocketError {
        // One frame over the limit (NIO's decoder holds frames to it).
        case .invalidFrameLength?: run(handshake.violated(.messageTooLarge(limit: reader.maxSize)), context: context)
        case let error?: run(handshake.violated(.protocolViolation("\(error)")), context: context)
        // The socket's own errors (a reset) close it; the cause is not the upstream's protocol.
        case nil: run(handshake.connectionLost(), context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed? = event as? ChannelEvent { run(handshake.connectionLost(), context: context) }
        context.fireUserInboundEventTriggered(event)
    }

    func read(context: ChannelHandlerContext) {
        guard context.channel.isWritable else {
            readHeld = true
            return
        }
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, readHeld {
            readHeld = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(wrapOutboundOut(Self.frame(.text, unwrapOutboundIn(data))), promise: promise)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all else { return context.close(mode: mode, promise: promise) }
        let action = handshake.closeRequested(channelIsActive: context.channel.isActive) {
            let closed = context.eventLoop.makePromise(of: Void.self)
            if let promise { closed.futureResult.cascade(to: promise) }
            let deadline = context.eventLoop.assumeIsolated().scheduleTask(in: closeTimeout) {
                self.run(self.handshake.deadlinePassed(), context: context)
            }
            return WaitingClose(closed: closed, deadline: deadline)
        }
        switch action {
        case .sendCloseAndWait:
            sendClose(.normalClosure, context: context)
        case .join(let waiting):
            // This close completes with the handshake's.
            if let promise { waiting.closed.futureResult.cascade(to: promise) }
        case .passOn:
            context.close(mode: mode, promise: promise)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Gone while the handshake ran: the close asked for is done.
        channelClosed()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Removed with its channel: no close is left waiting on the handshake.
        channelClosed()
    }

    private func channelClosed() {
        guard case .end(let waiting) = handshake.channelClosed() else { return }
        waiting?.deadline.cancel()
        waiting?.closed.succeed()
        ended.succeed(nil)
    }

    /// Ends the WebSocket as the handshake says: a close frame if one is due, the channel closed
    /// (completing a close that waited), then its end, with the violation that caused it.
    private func run(_ action: CloseHandshake<WaitingClose>.EndAction, context: ChannelHandlerContext) {
        switch action {
        case .sendCloseAndClose(let code, let cause):
            sendClose(code, context: context)
            context.close(mode: .all, promise: nil)
            ended.succeed(cause)
        case .close(let waiting, let cause):
            waiting?.deadline.cancel()
            context.close(mode: .all, promise: waiting?.closed)
            ended.succeed(cause)
        case .doNothing:
            break
        }
    }

    private func sendClose(_ code: WebSocketErrorCode, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        var payload = context.channel.allocator.buffer(capacity: 2)
        payload.write(webSocketErrorCode: code)
        context.writeAndFlush(wrapOutboundOut(Self.frame(.connectionClose, payload)), promise: nil)
    }

    private static func frame(_ opcode: WebSocketOpcode, _ data: ByteBuffer) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode, maskKey: .random(), data: data)
    }
}
