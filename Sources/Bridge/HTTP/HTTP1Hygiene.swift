import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// An HTTP/1.1 duty Hummingbird leaves to the application, done on the connection's event loop
/// (the other, `Expect: 100-continue`, is ``ProbeFastPath``'s, which keeps requests in order):
///
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

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let request) = unwrapInboundIn(data), request.headerFields[.upgrade] != nil { closeAfterResponse = true }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Nothing to look at in a response unless an upgrade was asked for (a cast per write costs).
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

extension HTTPRequest {
    /// `close` among the `Connection` header's tokens, in any case (`Connection: Close`,
    /// `Connection: keep-alive, close` too): the connection ends after this request's answer
    /// (RFC 9112 §9.6). The one reading of it: the request loop (``ProbingHTTP1Channel``) and
    /// ``ProbeFastPath`` both ask here.
    var asksToClose: Bool {
        headerFields[values: .connection].contains { value in
            value.split(separator: ",").contains { RequestInput.trimmed($0).lowercased() == "close" }
        }
    }
}
