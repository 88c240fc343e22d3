import DDP
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

// The request loop (`handle(value:logger:)`) follows Hummingbird 2.28.1's
// `HTTPChannelHandler.handleHTTP(asyncChannel:logger:)`, in
// `Sources/HummingbirdCore/Server/HTTP/HTTPChannelHandler.swift`; `setup` is
// `HTTP1Channel.setup(channel:logger:)` (`HTTP1Channel.swift`) as it is, with handlers added
// after the `HTTPConnectionStateHandler` it installs. Package.swift pins Hummingbird to 2.28.x;
// `RequestLoopTests` fails when what this copy relies on changes. Where it differs, on purpose:
// it can stop without closing (`StreamTakeOver`), so it does not use `executeThenClose`; a
// request whose head announces no body gets an empty body; `Connection: close` is a token in
// any case (`HTTPRequest.asksToClose`); a parse error is answered in the bridge's error shape
// (431 for a head past the parser's limit); it logs nothing of its own.

/// Hummingbird's HTTP/1.1 child channel with the bridge's handlers added, and a request loop
/// that can hand its connection to an event stream's writer.
///
/// ``ProbeFastPath`` goes after Hummingbird's connection-state handler (the one that enforces
/// the idle timeout). There, the requests the fast path answers and its answers pass through
/// that handler as any others do, so a kept-alive connection that only probes (a load
/// balancer's health check) is not taken for idle and closed; placed before it (as
/// `additionalChannelHandlers` would), it was, after `--read-timeout`.
///
/// The request loop is Hummingbird's (requests in order, each body read or skipped, `Connection:
/// close` honoured, its answer saying so (``ProbeFastPath``), a parse error answered 400), with
/// one difference that matters: when a response hands its connection to an event stream's
/// writer (``StreamHandOff``), the loop ends there without closing the connection, and the
/// connection's task ends with it. An open stream holds no task.
struct ProbingHTTP1Channel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let parts: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>
        let takeOver: StreamTakeOver?
        var channel: any Channel { parts.channel }
    }

    let base: HTTP1Channel
    let admission: ConnectionAdmission
    let refused: @Sendable (ConnectionAdmission.Decision) -> Void
    /// Counts a request the HTTP parser refused (its status), as every answered request is counted.
    let unparsed: @Sendable (HTTPResponse.Status) -> Void
    let fastPath: @Sendable () -> ProbeFastPath

    /// Reads start at `firstReadSize` and grow as reads fill them (a larger request takes a few
    /// more reads), up to NIO's usual 64 KiB.
    static let firstReadSize = 512
    static let readBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: firstReadSize, maximum: 65_536)

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // Counted before anything else is made for it; a refused connection is answered and
        // closed by a handler in front of everything (``RefusedConnection``).
        let address = channel.remoteAddress?.ipAddress ?? "unknown"
        let decision = admission.admit(address)
        if decision == .admitted {
            channel.closeFuture.whenComplete { _ in admission.release(address) }
        } else {
            refused(decision)
        }
        return base.setup(channel: channel, logger: logger).flatMapThrowing { parts in
            // The channel keeps its last read buffer for the next read (NIO's pooled receive
            // buffers): at NIO's first size of 2 KiB, every open event stream and kept-alive
            // connection held 2 KiB for a request head of a few hundred bytes.
            try channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.readBuffers)
            let operations = channel.pipeline.syncOperations
            if decision != .admitted {
                try operations.addHandler(RefusedConnection(decision), position: .first)
                return Value(parts: parts, takeOver: nil)
            }
            // The request's HTTP version, which the HTTP types codec does not carry (``HTTPVersionTap``).
            try operations.addHandler(HTTPVersionTap(), position: .before(try operations.handler(type: HTTP1ToHTTPServerCodec.self)))
            let connectionState = try operations.handler(type: HTTPConnectionStateHandler.self)
            let probes = fastPath()
            try operations.addHandler(probes, position: .after(connectionState))
            let hangUp = EventStreamHangUp()
            try operations.addHandler(hangUp, position: .after(probes))
            let hygiene = HTTP1Hygiene()
            try operations.addHandler(hygiene, position: .after(hangUp))
            // An event stream's writer goes after the anchor (``StreamAnchor/install(_:on:opening:)``).
            let anchor = StreamAnchor(takeOver: StreamTakeOver())
            try operations.addHandler(anchor, position: .after(hygiene))
            return Value(parts: parts, takeOver: anchor.takeOver)
        }
    }

    /// The context of the connection's HTTP/1 response encoder (``StreamHandOff`` writes its own
    /// chunks through it); `nil` when the pipeline has none.
    static func encoderContext(_ operations: ChannelPipeline.SynchronousOperations) -> ChannelHandlerContext? {
        try? operations.context(handlerType: HTTPResponseEncoder.self)
    }

    func handle(value: Value, logger: Logger) async {
        let channel = value.channel
        let (inbound, outbound) = value.parts.unscopedParts
        do {
            try await withTaskCancellationHandler {
                let requests = RequestParts(inbound.makeAsyncIterator())
                do {
                    // The first part of a request is its head.
                    guard var head = try await requests.nextHead() else { return close(channel, outbound, value.takeOver) }
                    while true {
                        let request = Request(head: head, body: requests.body(of: head))
                        try await base.responder(request, ResponseWriter(outbound: outbound), channel)
                        // An event stream's writer has the connection now: it stays open, this task
                        // ends. (The writer is finished, not dropped: a dropped one traps in debug
                        // builds; its half-closure is swallowed by ``StreamHandOff``.)
                        if value.takeOver?.isTaken == true { return outbound.finish() }
                        if head.asksToClose { break }
                        // The rest of a body the route did not read, then the next request.
                        try await requests.skipBody()
                        guard let next = try await requests.nextHead() else { break }
                        head = next
                    }
                } catch let error as HTTPParserError {
                    let refusal = Self.refusal(error)
                    unparsed(refusal.status)
                    var fields: HTTPFields = [.connection: "close", .contentType: "application/json"]
                    fields[.contentLength] = String(refusal.body.readableBytes)
                    try await outbound.write(contentsOf: [.head(.init(status: refusal.status, headerFields: fields)), .body(refusal.body), .end(nil)])
                }
                close(channel, outbound, value.takeOver)
            } onCancel: {
                channel.close(mode: .input, promise: nil)
            }
        } catch {
            // Reading or writing failed: the connection is gone or going.
            close(channel, outbound, value.takeOver)
        }
        if value.takeOver?.isTaken != true { try? await channel.closeFuture.get() }
    }

    /// The answer to a request the HTTP parser refused, in the bridge's error shape: 431 for a
    /// request line or header past the parser's limit (80 KiB each, 80 KiB in all), 400 otherwise.
    static func refusal(_ error: HTTPParserError) -> (status: HTTPResponse.Status, body: ByteBuffer) {
        let answer =
            error == .headerOverflow
            ? BridgeError(
                .requestHeaderTooLarge,
                "The request line or its headers are larger than 80 KiB (a request target is taken up to 64 KiB)")
            : BridgeError.badRequest("The request is not valid HTTP/1.1 (\(error))")
        return (answer.status, ByteBuffer(bytes: EJSONWriter.encode(answer.body)))
    }

    /// Finishes the writer and closes the connection, unless an event stream has it: one opened
    /// on the loop (``ProbeFastPath``) ends this loop's input without a request reaching it.
    private func close(_ channel: any Channel, _ outbound: NIOAsyncChannelOutboundWriter<HTTPResponsePart>, _ takeOver: StreamTakeOver?) {
        outbound.finish()
        if takeOver?.isTaken != true { channel.close(promise: nil) }
    }
}

/// One connection's request parts, read by one reader at a time: the request loop, or the
/// route reading its request's body (while the loop waits for the route).
final class RequestParts: @unchecked Sendable {
    private var iterator: NIOAsyncChannelInboundStream<HTTPRequestPart>.AsyncIterator
    /// The current request's `end` has been read (or there is no current request).
    private var bodyDone = true

    init(_ iterator: NIOAsyncChannelInboundStream<HTTPRequestPart>.AsyncIterator) { self.iterator = iterator }

    /// The next request's head; `nil` at the end of the connection's input.
    func nextHead() async throws -> HTTPRequest? {
        guard let part = try await iterator.next() else { return nil }
        guard case .head(let head) = part else { throw HTTPChannelPartError.unexpected }
        bodyDone = false
        return head
    }

    /// The current request's next body bytes; `nil` after its end.
    func nextBody() async throws -> ByteBuffer? {
        guard !bodyDone else { return nil }
        switch try await iterator.next() {
        case .body(let bytes): return bytes
        case .end, .none:
            bodyDone = true
            return nil
        case .head: throw HTTPChannelPartError.unexpected
        }
    }

    /// The body of the request `head` starts: empty when its head announces none (neither
    /// `Content-Length` nor `Transfer-Encoding`: HTTP/1.1 requests without them have no body), so
    /// most requests make no body sequence.
    func body(of head: HTTPRequest) -> RequestBody {
        if head.headerFields[.contentLength] == nil, head.headerFields[.transferEncoding] == nil { return RequestBody(buffer: Self.empty) }
        return RequestBody(asyncSequence: Body(parts: self))
    }

    private static let empty = ByteBuffer()

    func skipBody() async throws {
        while try await nextBody() != nil {}
    }

    /// A request's body, as Hummingbird's `RequestBody` reads it.
    struct Body: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let parts: RequestParts

        struct AsyncIterator: AsyncIteratorProtocol {
            let parts: RequestParts
            mutating func next() async throws -> ByteBuffer? { try await parts.nextBody() }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(parts: parts) }
    }
}

/// A request part out of order (a body where a head belongs, or a head inside a body).
enum HTTPChannelPartError: Error { case unexpected }

/// The async channel's inbound and outbound without `executeThenClose`, which closes the channel
/// when its body returns and then waits for the close: a connection handed to an event
/// stream's writer must stay open after its request task ends. The request loop closes the
/// channel itself on every other way out. (Internal, not private: a test that sets a channel up
/// finishes its writer the same way.)
protocol UnscopedParts {
    associatedtype Inbound: Sendable
    associatedtype Outbound: Sendable
    var inbound: NIOAsyncChannelInboundStream<Inbound> { get }
    var outbound: NIOAsyncChannelOutboundWriter<Outbound> { get }
}

extension NIOAsyncChannel: UnscopedParts {}

extension UnscopedParts {
    var unscopedParts: (NIOAsyncChannelInboundStream<Inbound>, NIOAsyncChannelOutboundWriter<Outbound>) { (inbound, outbound) }
}
