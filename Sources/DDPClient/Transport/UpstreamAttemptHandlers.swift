import DDP
import NIOCore
import NIOHTTP1
import NIOTLS

// The small handlers of an attempt before its upgrade has an outcome (``UpstreamChannel``).

/// Sees how far an attempt gets before the upgrade: the connection open (then TLS for
/// `wss://`, else the upgrade), and TLS's handshake finished. Removed once the upgrade has an
/// outcome, so the WebSocket's reads do not pass it.
final class AttemptStageObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    static let name = "ddp-bridge.attempt-stage"

    private let handle: ChannelHandle
    private let connected: AttemptConnected
    private let secure: Bool

    init(handle: ChannelHandle, connected: AttemptConnected, secure: Bool) {
        self.handle = handle
        self.connected = connected
        self.secure = secure
    }

    func channelActive(context: ChannelHandlerContext) {
        connected.set()
        // Of the channels tried for a name's addresses, the handle holds the one that connected.
        handle.attach(context.channel)
        handle.reached(secure ? .tls : .upgrade)
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted? = event as? TLSUserEvent { handle.reached(.upgrade) }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Takes the head of an answer to the upgrade that was not 101 (NIO's upgrade handler hands it
/// on after the upgrade's outcome), and drops the rest.
final class DeclinedUpgradeAnswer: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let answer: EventLoopPromise<HTTPResponseHead>

    init(answer: EventLoopPromise<HTTPResponseHead>) { self.answer = answer }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) { answer.succeed(head) }
    }
}
