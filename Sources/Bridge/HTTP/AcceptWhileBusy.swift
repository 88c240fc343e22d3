import NIOCore

/// Keeps the listening socket accepting while the request path is saturated. Hummingbird hands
/// each accepted connection to its accept loop, a Swift task, through a buffer with a high
/// watermark: while every worker of the cooperative pool is busy the loop takes none, and past
/// a few waiting connections the server stopped asking the socket for more — so a health checker
/// opening a connection per probe waited for the request path, although ``FrontDoor``
/// answers probes on the event loop as soon as a connection is set up. This handler, first in the
/// listening channel's pipeline, asks for the next connection after each batch itself. What the
/// connections waiting for the accept loop hold is bounded by ``ConnectionAdmission`` (each is
/// counted as it is set up, before the loop sees it).
final class AcceptWhileBusy: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
        context.read()
    }
}
