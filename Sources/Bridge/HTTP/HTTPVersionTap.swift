import NIOCore
import NIOHTTP1

/// Keeps each request's HTTP version across the HTTP types codec, which forgets it (every
/// response leaves it as HTTP/1.1): the response to an HTTP/1.0 request is written as HTTP/1.0,
/// so the encoder frames a body of unknown length by the connection's close, as HTTP/1.0 does,
/// not in chunks, which an HTTP/1.0 client does not know; such a response closes its connection.
/// Between NIO's HTTP/1 encoder and decoder and the codec; on its channel's event loop.
final class HTTPVersionTap: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The versions of the requests read and not answered yet, oldest first (a pipelining client's).
    private var pending: [HTTPVersion] = []

    /// Whether the response being written answers an HTTP/1.0 request: its body is not chunked.
    var answersHTTP10: Bool { pending.first.map { $0.major == 1 && $0.minor == 0 } ?? false }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) { pending.append(head.version) }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where answersHTTP10:
            head.version = .http1_0
            // No length and no chunks: the close ends the body.
            if !head.headers.contains(name: "content-length") { head.headers.replaceOrAdd(name: "connection", value: "close") }
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end:
            if !pending.isEmpty { pending.removeFirst() }
            context.write(data, promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }
}
