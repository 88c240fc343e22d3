import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes
import ServiceLifecycle

/// Answers the requests the front door hands to the router (``FrontDoor``), each as a child
/// task of this service's task group that lives as long as its request: the route's work, then
/// its response written to the connection. A connection between requests holds no task.
///
/// A service of the application, stopped after the HTTP server (services stop in reverse
/// order): on a graceful shutdown it takes no new request (the door answers them 503
/// `shutting-down`) and ends once the requests in flight are answered.
final class RequestRunner: Service, Sendable {
    private let requests: AsyncStream<RoutedRequest>
    private let inbox: AsyncStream<RoutedRequest>.Continuation
    private let responder: RouterResponder<BridgeRequestContext>
    private let date: HTTPDate
    private let serverName: String?
    private let logger: Logger

    init(responder: RouterResponder<BridgeRequestContext>, date: HTTPDate, serverName: String?, logger: Logger) {
        (requests, inbox) = AsyncStream.makeStream()
        self.responder = responder
        self.date = date
        self.serverName = serverName
        self.logger = logger
    }

    /// Hands `request` to a task of its own; `false` once the service has stopped taking them.
    /// (Unbounded by count: each connection has at most one request here at a time, and the
    /// connections are bounded, ``ConnectionAdmission``.)
    func submit(_ request: RoutedRequest) -> Bool {
        if case .enqueued = inbox.yield(request) { return true }
        return false
    }

    func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await request in requests {
                    group.addTask { await self.answer(request) }
                }
            }
        } onGracefulShutdown: {
            self.inbox.finish()
        }
    }

    /// The router's answer to `request`, written to its connection with the `Date` and `Server`
    /// headers every routed answer has. An error the middlewares did not shape is a bare 500.
    private func answer(_ routed: RoutedRequest) async {
        var logger = self.logger
        logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
        var context = BridgeRequestContext(source: ApplicationRequestContextSource(channel: routed.channel, logger: logger))
        context.verbSent = routed.verbSent
        let request = Request(head: routed.head, body: RequestBody(buffer: routed.body))
        var response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            logger.debug("unshaped error", metadata: ["error.type": "\(error)"])
            response = Response(status: .internalServerError)
        }
        response.headers[.date] = date.now
        if let serverName { response.headers[.server] = serverName }
        let writer = ChannelResponseWriter(channel: routed.channel, head: response.head, length: response.body.contentLength)
        do {
            try await response.body.write(writer)
        } catch {
            // The connection is gone or going.
            routed.channel.close(promise: nil)
        }
    }
}

/// Writes a routed response to its connection: the head with the first bytes; a body of known
/// length in one write with its end (the common answer: one buffer, one write to the socket);
/// a body of unknown length (an event stream's first bytes) as it comes, each write waiting
/// for the socket only while the connection is past its high watermark.
struct ChannelResponseWriter: ResponseBodyWriter {
    private let channel: any Channel
    private var head: HTTPResponse?
    /// The body's length when known: its bytes are held until it is complete.
    private let length: Int?
    private var held: [ByteBuffer] = []
    private var heldBytes = 0

    init(channel: any Channel, head: HTTPResponse, length: Int?) {
        self.channel = channel
        self.head = head
        self.length = length
    }

    mutating func write(_ buffer: ByteBuffer) async throws {
        held.append(buffer)
        heldBytes += buffer.readableBytes
        // A body of known length goes with its end, unless it is large: then as it comes.
        if let length, heldBytes <= length, heldBytes <= Self.heldLimit { return }
        try await send()
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        var parts: [HTTPResponsePart] = []
        if let head { parts.append(.head(head)) }
        parts += held.map { .body($0) }
        parts.append(.end(trailingHeaders))
        let channel = self.channel
        channel.eventLoop.execute {
            for part in parts.dropLast() { channel.write(part, promise: nil) }
            if let last = parts.last { channel.writeAndFlush(last, promise: nil) }
        }
    }

    /// The most held back for a body of known length.
    static let heldLimit = 64 << 10

    /// Writes what is held now (with the head, the first time).
    private mutating func send() async throws {
        var parts: [HTTPResponsePart] = []
        if let head { parts.append(.head(head)) }
        head = nil
        parts += held.map { .body($0) }
        held = []
        heldBytes = 0
        let channel = self.channel
        let written = channel.eventLoop.submit {
            for part in parts.dropLast() { channel.write(part, promise: nil) }
            return parts.last.map { channel.writeAndFlush($0) }
        }.flatMap { $0 ?? channel.eventLoop.makeSucceededVoidFuture() }
        // Wait for the socket only while it is past its high watermark: what is written is bounded.
        if !channel.isWritable { try await written.get() }
    }
}
