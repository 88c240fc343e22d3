import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Two HTTP/1.1 duties Hummingbird leaves to the application, done on the connection's event loop:
///
/// - `Expect: 100-continue`: `100 Continue` is sent as the request head arrives, so a client
///   that waits for it before sending its body (curl does, for a second) does not stall; for a
///   request pipelined behind a response still being written (an event stream), once that
///   response ends: written at once, it landed in the middle of the other response's body.
/// - `Upgrade:` the bridge offers none: NIO's HTTP/1.1 parser stops reading at a request that asks
///   for an upgrade, so a request pipelined after it was never answered and the connection hung.
///   The request is answered as usual, with `Connection: close`, and the connection closed after
///   it: the client sees the close and sends what it pipelined again.
///
/// Placed after ``ProbeFastPath`` (which leaves such requests to the router). One instance per
/// connection, used only on its event loop.
final class HTTP1Hygiene: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// A request asked for an upgrade: the connection ends after its response.
    private var closeAfterResponse = false
    /// The requests whose response has not ended, oldest first: whether each still waits for
    /// its `100 Continue` (owed once its turn comes).
    private var owed: [Bool] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let request) = unwrapInboundIn(data) {
            if request.headerFields[.upgrade] != nil { closeAfterResponse = true }
            let expects = request.headerFields[values: .expect].contains(where: { $0.lowercased() == "100-continue" })
            owed.append(expects)
            if owed.count == 1 { sendContinueIfOwed(context: context) }
        }
        context.fireChannelRead(data)
    }

    /// `100 Continue` for the request whose turn it is, if it asked and has not had it.
    private func sendContinueIfOwed(context: ChannelHandlerContext) {
        guard owed.first == true else { return }
        owed[0] = false
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), !owed.isEmpty {
            // This response is done: the next request's turn (its `100 Continue`, if owed, follows it).
            owed.removeFirst()
            guard closeAfterResponse else {
                context.write(data, promise: promise)
                return sendContinueIfOwed(context: context)
            }
        }
        guard closeAfterResponse else { return context.write(data, promise: promise) }
        switch unwrapOutboundIn(data) {
        case .head(var response) where response.status.kind != .informational:
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end:
            let channel = context.channel
            context.writeAndFlush(data).whenComplete { result in
                promise?.completeWith(result)
                channel.close(promise: nil)
            }
        default:
            context.write(data, promise: promise)
        }
    }
}
