import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// The bridge's HTTP/1.1 connection, set up from public parts: NIO's HTTP/1 encoder and decoder,
/// the version tap (``HTTPVersionTap``), the HTTP types codec, Hummingbird's connection-state
/// handler (the idle timeout, and the close on a graceful shutdown), and the front door
/// (``FrontDoor``), which decides every request from then on. Hummingbird's server accepts the
/// connection and runs ``handle(value:logger:)``, which has nothing left to do: requests for
/// the router run as tasks of their own (``RequestRunner``), so a connection between requests,
/// and an event stream's, holds no task.
///
/// The admission comes first (``ConnectionAdmission``): a refused connection gets only its
/// answer and its close (``RefusedConnection``).
struct BridgeChildChannel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
    }

    let admission: ConnectionAdmission
    let refused: @Sendable (ConnectionAdmission.Decision) -> Void
    /// How long a connection may idle between requests (`--read-timeout`).
    let idleTimeout: Duration
    let rooms: FrontDoor.Rooms

    /// Reads start at `firstReadSize` and grow as reads fill them (a larger request takes a few
    /// more reads), up to NIO's usual 64 KiB.
    static let firstReadSize = 512
    static let readBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: firstReadSize, maximum: 65_536)

    /// The HTTP parser's limits: a request line or header field of 80 KiB, 80 KiB of headers in
    /// all (Hummingbird's defaults; a longer head is answered 431).
    static let decoderLimits: NIOHTTPDecoderLimitConfiguration = {
        var limits = NIOHTTPDecoderLimitConfiguration()
        let hummingbird = HTTP1Channel.Configuration.DecoderConfiguration()
        limits.maxHeaderFieldSize = hummingbird.maxHeaderFieldSize
        limits.maxHeaderListSize = hummingbird.maxHeaderListSize
        limits.maxHeaderFieldCount = hummingbird.maxHeaderFieldCount
        return limits
    }()

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            // Counted before anything else is made for it.
            let address = channel.remoteAddress?.ipAddress ?? "unknown"
            let decision = admission.admit(address)
            let operations = channel.pipeline.syncOperations
            guard decision == .admitted else {
                refused(decision)
                try operations.addHandler(RefusedConnection(decision))
                return Value(channel: channel)
            }
            channel.closeFuture.whenComplete { _ in admission.release(address) }
            // The channel keeps its last read buffer for the next read (NIO's pooled receive
            // buffers): at NIO's first size of 2 KiB, every open event stream and kept-alive
            // connection held 2 KiB for a request head of a few hundred bytes.
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.readBuffers)
            try operations.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(), withDecoderLimitConfiguration: Self.decoderLimits)
            try operations.addHandler(HTTPVersionTap())
            try operations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            // The front door goes after the connection-state handler: the requests it answers pass
            // through that handler as any others do, so a kept-alive connection that only probes (a
            // load balancer's health check) is not taken for idle and closed.
            try operations.addHandler(HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
            try operations.addHandler(FrontDoor(rooms))
            return Value(channel: channel)
        }
    }

    /// Nothing: the connection is its handlers' from its setup on (``FrontDoor``).
    func handle(value: Value, logger: Logger) async {}

    /// The context of the connection's HTTP/1 response encoder (``StreamHandOff`` writes its own
    /// chunks through it); `nil` when the pipeline has none.
    static func encoderContext(_ operations: ChannelPipeline.SynchronousOperations) -> ChannelHandlerContext? {
        try? operations.context(handlerType: HTTPResponseEncoder.self)
    }
}
