import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes the connection when its client hangs up while an event stream is being written to it.
/// Hummingbird allows half-closure, so a client's FIN is only an `inputClosed` event and the
/// connection stayed open until the stream's next write failed (a heartbeat away: 15 s), holding
/// the stream's place (a session's stream slot, a public reader's per-address slot). Closed here,
/// the connection's close future ends the stream at once (``BridgeRoutes/sseResponse``). Other
/// responses to a half-closed client are left to finish. Used only on its channel's event loop.
final class EventStreamHangUp: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var streaming = false
    private var inputClosed = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.fireChannelRead(data) }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status.kind != .informational:
            streaming = head.headerFields[.contentType]?.hasPrefix("text/event-stream") == true
        case .end: streaming = false
        case .head, .body: break
        }
        guard streaming, inputClosed else { return context.write(data, promise: promise) }
        context.writeAndFlush(data, promise: promise)
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputClosed = true
            if streaming {
                context.close(promise: nil)
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }
}
