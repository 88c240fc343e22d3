public import Hummingbird
public import NIOCore

/// The request context of every bridge route: Hummingbird's core storage and the peer address.
public struct BridgeRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// Completes when the client's connection closes: an event stream ends then, rather than
    /// at its next write (which may be a heartbeat away), and frees what it held at once.
    let connectionClosed: EventLoopFuture<Void>
    /// The client's connection (an event stream hands it to its event loop's writer).
    let channel: any Channel
    /// A verb no route takes (`QUERY`, `PROPFIND`, any token), as the client sent it: the request
    /// is routed as `TRACE`, which no path takes either (``RequestClassifier/routedVerb(for:)``).
    var verbSent: HTTPRequest.Method?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        connectionClosed = source.channel.closeFuture
        channel = source.channel
    }
}
