import NIOCore
import NIOWebSocket

/// The upstream WebSocket's data path, a handler on the connection's event loop (no task):
/// frames in through ``UpstreamFrameReader``, each whole message handed to `received` on the
/// loop; DDP messages out as masked text frames (a client's frames are masked, RFC 6455 §5.3);
/// pings answered; a close answered and the connection closed. Closing the channel while the
/// WebSocket is open is the close handshake: a close frame goes out, and the channel closes
/// when the upstream's close frame comes back, or after `closeTimeout` (a TLS connection closed
/// before the peer's answer waits for the peer's `close_notify`).
///
/// `ended` is completed when the WebSocket ends (the channel closing, or gone): with the
/// violation that ended it, if one did; nothing is handed on after it. Its owner does not wait
/// for the socket's last bytes (NIOSSL waits up to 5 s for a peer's `close_notify` before the
/// channel goes). The upstream's end of the stream (its FIN) ends the WebSocket at once: the
/// channel closes on it, or, on a channel that allows half-closure, the handler closes it. While the socket takes no more writes, the handler reads no more
/// (so an upstream that sends and never reads cannot queue pongs without bound).
final class UpstreamFrameHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = WebSocketFrame

    private var reader: UpstreamFrameReader
    private let received: (ByteBuffer) -> Void
    private let ended: EventLoopPromise<UpstreamTransportError?>
    private var failure: UpstreamTransportError?
    private let closeTimeout: TimeAmount
    private var closeSent = false
    /// The close of the channel asked for while the handshake runs, and its deadline.
    private var closing: (promise: EventLoopPromise<Void>?, deadline: Scheduled<Void>)?
    private var finished = false
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
        guard !finished else { return }
        do {
            switch try reader.read(unwrapInboundIn(data)) {
            case .none:
                break
            case .message(let message):
                received(message)
            case .pong(let payload):
                context.writeAndFlush(wrapOutboundOut(Self.frame(.pong, payload)), promise: nil)
            case .close:
                sendClose(.normalClosure, context: context)
                closeNow(context: context)
            }
        } catch {
            fail(error, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error as? NIOWebSocketError {
        // One frame over the limit (NIO's decoder holds frames to it).
        case .invalidFrameLength?: fail(.messageTooLarge(limit: reader.maxSize), context: context)
        case let error?: fail(.protocolViolation("\(error)"), context: context)
        // The socket's own errors (a reset) close it; the cause is not the upstream's protocol.
        case nil: closeNow(context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed? = event as? ChannelEvent { closeNow(context: context) }
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
        if mode == .all, let pending = closing {
            // The handshake is running: this close completes with it.
            if let promise {
                if let first = pending.promise { first.futureResult.cascade(to: promise) } else { closing = (promise, pending.deadline) }
            }
            return
        }
        guard mode == .all, !closeSent, context.channel.isActive else {
            return context.close(mode: mode, promise: promise)
        }
        sendClose(.normalClosure, context: context)
        let deadline = context.eventLoop.assumeIsolated().scheduleTask(in: closeTimeout) { self.closeNow(context: context) }
        closing = (promise, deadline)
    }

    /// Closes the channel, completing a close asked for earlier.
    private func closeNow(context: ChannelHandlerContext) {
        context.close(mode: .all, promise: endHandshake())
        finish()
    }

    /// Ends a running close handshake (its deadline with it); the promise of the close that began it.
    private func endHandshake() -> EventLoopPromise<Void>? {
        let pending = closing
        closing = nil
        pending?.deadline.cancel()
        return pending?.promise
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Gone while the handshake ran: the close asked for is done.
        endHandshake()?.succeed()
        finish()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Removed with its channel: no close is left waiting on the handshake.
        endHandshake()?.succeed()
        finish()
    }

    private func fail(_ error: UpstreamTransportError, context: ChannelHandlerContext) {
        guard failure == nil else { return }
        failure = error
        sendClose(error.closeCode, context: context)
        closeNow(context: context)
    }

    private func sendClose(_ code: WebSocketErrorCode, context: ChannelHandlerContext) {
        guard !closeSent, context.channel.isActive else { return }
        closeSent = true
        var payload = context.channel.allocator.buffer(capacity: 2)
        payload.write(webSocketErrorCode: code)
        context.writeAndFlush(wrapOutboundOut(Self.frame(.connectionClose, payload)), promise: nil)
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        ended.succeed(failure)
    }

    private static func frame(_ opcode: WebSocketOpcode, _ data: ByteBuffer) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode, maskKey: .random(), data: data)
    }
}
