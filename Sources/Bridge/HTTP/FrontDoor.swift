import DDP
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import Timing

/// What `GET /healthz` and `GET /readyz` answer: status, headers and body, built without
/// waiting on anything, so the router and ``FrontDoor`` send the same bytes.
struct ProbeAnswer: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let body: [UInt8]

    init(status: HTTPResponse.Status, headers: HTTPFields = [:], json: EJSON) {
        var headers = headers
        headers[.contentType] = "application/json"
        SecurityHeadersMiddleware.add(to: &headers)
        self.status = status
        self.headers = headers
        self.body = EJSONWriter.encode(json)
    }

    /// Liveness: the process answers.
    static let health = ProbeAnswer(status: .ok, json: ["status": "ok"])

    /// Readiness: 200 while the upstream is reachable, 503 with `Retry-After` (the time to the
    /// next reconnect attempt, or 5 s) in the bridge's error shape while it is not, its
    /// `details.cause` naming why when the last attempt said (``DDP/UpstreamFailure``).
    static func readiness(_ connection: ConnectionState, failure: UpstreamFailure?, sessions: Int, shuttingDown: Bool) -> ProbeAnswer {
        if shuttingDown {
            let error = BridgeError(
                .shuttingDown, "The bridge is shutting down; requests in flight finish, new ones belong elsewhere",
                retryAfter: 5)
            return ProbeAnswer(status: error.status, headers: [.retryAfter: "5"], json: error.body)
        }
        guard !ReadinessProbe.isReady(connection) else {
            return ProbeAnswer(status: .ok, json: ["status": "ready", "upstream": connection.ejson, "sessions": .int(sessions)])
        }
        var retry = 5
        // Fractional milliseconds (a Double), rounded up to seconds there: `wholeMilliseconds` would truncate first.
        if case .reconnecting(_, let delay, _) = connection { retry = BridgeError.retryAfterSeconds(milliseconds: delay.seconds * 1000) }
        let reason = "The upstream Meteor server is not reachable" + (failure.map { ": \($0.message)" } ?? "")
        let error = BridgeError(
            .upstreamUnavailable, reason, details: UpstreamFailure.details(connection, failure), retryAfter: retry)
        return ProbeAnswer(status: error.status, headers: [.retryAfter: String(retry)], json: error.body)
    }

    var response: Response {
        Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// An event stream opened on its connection's event loop, without the request path: the stream
/// (attached, and released when its connection closes), its response's head and first bytes, and
/// the route it counts under.
struct LoopStream {
    let stream: EventStream
    let head: HTTPResponse
    let body: ByteBuffer
    let route: String
}

/// What the event loop's door makes of a stream request (``BridgeRoutes/openStreamOnLoop(_:on:)``).
enum LoopOpening {
    /// Opened: the stream and its response.
    case stream(LoopStream)
    /// Refused, with the answer the router gives it (the same bytes), counted under `route`.
    case refuse(ProbeAnswer, route: String)
    /// Left to the router (something must be waited for: a session in the store, a subscription).
    case route
}

extension ProbeAnswer {
    /// A refusal in the bridge's error shape, with its `Retry-After` and `Allow`, as the router answers it.
    init(_ error: BridgeError) {
        var headers: HTTPFields = [:]
        if let retryAfter = error.retryAfter { headers[.retryAfter] = String(retryAfter) }
        if !error.allow.isEmpty { headers[.allow] = error.allow.map(\.rawValue).joined(separator: ", ") }
        self.init(status: error.status, headers: headers, json: error.body)
    }
}

/// A request the router answers: its head, its body (read on the event loop up to the body limit
/// and one byte more, so the route can answer 413), and its connection.
struct RoutedRequest: Sendable {
    let head: HTTPRequest
    let body: ByteBuffer
    let channel: any Channel
    /// The verb the client sent, when the head is routed as another
    /// (``RequestClassifier/routedVerb(for:)``).
    var verbSent: HTTPRequest.Method? = nil
}

/// The one door of every HTTP request, on its connection's event loop: each request head is
/// decided once, here, and answered in the connection's order (docs/ARCHITECTURE.md, "The front
/// door"):
///
/// - a probe (`GET /healthz`, `GET /readyz`) is answered here, so a health check is answered
///   even while every worker of Swift's cooperative pool is busy;
/// - an event stream request is opened here when it needs nothing waited for, or refused here
///   when what is wrong is known from its head, with the router's bytes
///   (``BridgeRoutes/openStreamOnLoop(_:on:)``): its writer then takes the connection
///   (``StreamHandOff/install(_:on:opening:)``) and this door leaves the pipeline;
/// - every other request is read (its body up to the limit) and handed to the router as one
///   job (``RequestRunner``), a task that lives as long as its request: a connection between
///   requests holds no task.
///
/// Only a plain `GET` (no body, no `Origin`, no upgrade) is answered here; one with `Origin` goes
/// to the router, where CORS is. A request that arrives while an answer is being written waits
/// for it (a pipelining client's), and the connection is read no further meanwhile. The door
/// sends `Expect: 100-continue`'s `100 Continue` when the request's turn comes; a request that
/// asks to close (`Connection: close`, a token in any case) or for an upgrade (the bridge offers
/// none) is answered with `Connection: close` and the connection closed after it; a request the
/// HTTP parser refuses is answered 400 (431 for a head too large) in the bridge's error shape,
/// counted, and the connection closed; a client that half-closes its side is closed once its
/// answers are written. One instance per connection, used only on its event loop.
final class FrontDoor: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// What the bridge gives every connection's door.
    struct Rooms: Sendable {
        /// A probe's answer, now.
        let answer: @Sendable (RequestDecision.Probe) -> ProbeAnswer
        /// An event stream opened for a request without waiting on anything, its refusal, or
        /// `.route`, with nothing taken, for a request the router answers.
        let openStream: @Sendable (RequestDecision.StreamDoor, HTTPRequest, any Channel) -> LoopOpening
        /// Hands a request to the router; `false` when the bridge takes no more (it is stopping).
        let route: @Sendable (RoutedRequest) -> Bool
        /// Told of each answer sent here (route label and status), for request metrics.
        let answered: @Sendable (String, HTTPResponse.Status) -> Void
        /// The largest request body read for the router (one byte more is read, so it answers 413).
        let bodyLimit: Int
        /// The `Date` header of the answers sent here.
        let date: HTTPDate

        init(
            answer: @escaping @Sendable (RequestDecision.Probe) -> ProbeAnswer,
            openStream: @escaping @Sendable (RequestDecision.StreamDoor, HTTPRequest, any Channel) -> LoopOpening = { _, _, _ in .route },
            route: @escaping @Sendable (RoutedRequest) -> Bool,
            answered: @escaping @Sendable (String, HTTPResponse.Status) -> Void,
            bodyLimit: Int = 1 << 20,
            date: HTTPDate = HTTPDate(clock: .system)
        ) {
            self.answer = answer
            self.openStream = openStream
            self.route = route
            self.answered = answered
            self.bodyLimit = bodyLimit
            self.date = date
        }
    }

    /// A request being read for the router.
    private struct Reading {
        let head: HTTPRequest
        var body: ByteBuffer?
        var bytes = 0
        let closes: Bool
    }

    /// What arrived while an answer was being written, kept in order.
    private enum Arrival {
        case part(HTTPRequestPart)
        case unparsed(HTTPParserError)
    }

    private let rooms: Rooms
    private var reading: Reading?
    /// The router is answering a request; `true`: the connection closes after its answer.
    private var responding: Bool?
    private var inbox = CircularBuffer<Arrival>()
    /// The rest (body parts, end) of a request answered here, to be dropped.
    private var discarding = false
    /// The connection is closing: nothing more is read or answered.
    private var closing = false
    /// The client closed its side: the connection closes once what it asked is answered.
    private var inputEnded = false
    /// A read held back while a pipelining client waits for its turn.
    private var readHeld = false
    /// The door left the pipeline (a stream took the connection).
    private var removed = false

    init(_ rooms: Rooms) { self.rooms = rooms }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
        inbox.removeAll()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let part = unwrapInboundIn(data)
        guard responding == nil, inbox.isEmpty else { return inbox.append(.part(part)) }
        take(part, context: context)
    }

    func read(context: ChannelHandlerContext) {
        // A pipelining client waits: nothing more is read while its requests wait for their turn.
        guard inbox.isEmpty else {
            readHeld = true
            return
        }
        context.read()
    }

    private func take(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let request):
            decide(request, context: context)
        case .body(let bytes):
            guard !discarding, var current = reading else { return }
            reading = nil
            let room = rooms.bodyLimit + 1 - current.bytes
            if room > 0 {
                let taken = bytes.readableBytes > room ? bytes.getSlice(at: bytes.readerIndex, length: room) ?? bytes : bytes
                current.bytes += taken.readableBytes
                if var body = current.body {
                    current.body = nil
                    body.writeImmutableBuffer(taken)
                    current.body = body
                } else {
                    current.body = taken
                }
            }
            reading = current
        case .end:
            if discarding {
                discarding = false
                return
            }
            guard let current = reading else { return }
            reading = nil
            hand(current, context: context)
        }
    }

    /// Decides a request from its head, once (``RequestClassifier``): a probe, a stream, a
    /// refusal, or the router's.
    private func decide(_ request: HTTPRequest, context: ChannelHandlerContext) {
        switch RequestClassifier.classify(RequestHead(request)) {
        case .probe(let probe):
            let answer = rooms.answer(probe)
            discarding = true
            send(answer, closing: request.asksToClose, context: context)
            rooms.answered(probe == .health ? "/healthz" : "/readyz", answer.status)
        case .refuse(let problem, let door):
            discarding = true
            let refusal = ProbeAnswer(RequestHygieneMiddleware.refusal(problem))
            send(refusal, closing: false, context: context)
            rooms.answered(door.path, refusal.status)
        case .stream(let door):
            switch rooms.openStream(door, request, context.channel) {
            case .stream(let opened):
                discarding = true
                start(opened, context: context)
            case .refuse(let refusal, let route):
                discarding = true
                send(refusal, closing: false, context: context)
                rooms.answered(route, refusal.status)
            case .route:
                readForRouter(request, closes: false, context: context)
            }
        case .router(let closes):
            readForRouter(request, closes: closes, context: context)
        }
    }

    /// Reads a request for the router: its body, then the whole of it is handed on.
    private func readForRouter(_ request: HTTPRequest, closes: Bool, context: ChannelHandlerContext) {
        reading = Reading(head: request, closes: closes)
        if request.headerFields[values: .expect].contains(where: { $0.lowercased() == "100-continue" }) {
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
        }
    }

    /// Hands a request read in full to the router; its answer comes back through ``write(context:data:promise:)``.
    private func hand(_ request: Reading, context: ChannelHandlerContext) {
        responding = request.closes
        var head = request.head
        var verbSent: HTTPRequest.Method?
        if let verb = RequestClassifier.routedVerb(for: head.method.rawValue).flatMap({ HTTPRequest.Method($0) }) {
            verbSent = head.method
            head.method = verb
        }
        let routed = RoutedRequest(head: head, body: request.body ?? ByteBuffer(), channel: context.channel, verbSent: verbSent)
        guard rooms.route(routed) else {
            responding = nil
            let refusal = ProbeAnswer(BridgeError(.shuttingDown, "The bridge is shutting down; send the request again elsewhere", retryAfter: 5))
            send(refusal, closing: true, context: context)
            rooms.answered("unrouted", refusal.status)
            return
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard let closes = responding else { return context.write(data, promise: promise) }
        switch unwrapOutboundIn(data) {
        case .head(var response) where closes && response.status.kind != .informational:
            // The request asked to close: its answer says so (RFC 9112 §9.6).
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end:
            responding = nil
            if closes {
                closing = true
                let channel = context.channel
                context.writeAndFlush(data).whenComplete { result in
                    promise?.completeWith(result)
                    channel.close(promise: nil)
                }
                return
            }
            context.write(data, promise: promise)
            resume(context: context)
        default:
            context.write(data, promise: promise)
        }
    }

    /// The next turn: what waited is taken in order, then reading goes on.
    private func resume(context: ChannelHandlerContext) {
        while responding == nil, !closing, !removed, let arrival = inbox.popFirst() {
            switch arrival {
            case .part(let part): take(part, context: context)
            case .unparsed(let error): refuse(error, context: context)
            }
        }
        guard !removed, !closing, responding == nil else { return }
        if inputEnded, reading == nil {
            closing = true
            context.close(promise: nil)
            return
        }
        if readHeld, inbox.isEmpty {
            readHeld = false
            context.read()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else { return context.fireUserInboundEventTriggered(event) }
        // The client has nothing more to send: what it asked is answered, then the connection closes.
        inputEnded = true
        if responding == nil, inbox.isEmpty, reading == nil, !closing {
            closing = true
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? HTTPParserError else {
            // Reading or writing failed: the connection is gone or going.
            context.close(promise: nil)
            return
        }
        guard !closing else { return }
        guard responding == nil, inbox.isEmpty else { return inbox.append(.unparsed(error)) }
        refuse(error, context: context)
    }

    /// A request the HTTP parser refused: answered in the bridge's error shape and counted, then
    /// the connection closes (the parser reads nothing more of it).
    private func refuse(_ error: HTTPParserError, context: ChannelHandlerContext) {
        let refusal = ProbeAnswer(Self.refusal(error))
        reading = nil
        send(refusal, closing: true, context: context)
        rooms.answered("unparsed", refusal.status)
    }

    /// What a request the HTTP parser refused is answered: 431 for a request line or header past
    /// the parser's limit (80 KiB each, 80 KiB in all), 400 otherwise.
    static func refusal(_ error: HTTPParserError) -> BridgeError {
        error == .headerOverflow
            ? BridgeError(
                .requestHeaderTooLarge, "The request line or its headers are larger than 80 KiB (a request target is taken up to 64 KiB)")
            : BridgeError.badRequest("The request is not valid HTTP/1.1 (\(error))")
    }

    /// Hands the connection to an event stream opened here: its writer writes the response's head
    /// and first bytes and takes the connection (``StreamHandOff/install(_:on:opening:)``).
    private func start(_ opened: LoopStream, context: ChannelHandlerContext) {
        let channel = context.channel
        var head = opened.head
        head.headerFields[.date] = rooms.date.now
        guard StreamHandOff.install(opened.stream, on: channel, opening: (head, opened.body)) else {
            // The connection is going: its close releases what the stream held.
            closing = true
            channel.close(promise: nil)
            return
        }
        rooms.answered(opened.route, opened.head.status)
    }

    private func send(_ probe: ProbeAnswer, closing: Bool, context: ChannelHandlerContext) {
        var response = HTTPResponse(status: probe.status, headerFields: probe.headers)
        response.headerFields[.date] = rooms.date.now
        response.headerFields[.contentLength] = String(probe.body.count)
        if closing {
            response.headerFields[.connection] = "close"
            self.closing = true
        }
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: probe.body))), promise: nil)
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        // The client that closed its side has its answer: the connection closes after it.
        if !closing, inputEnded, inbox.isEmpty { self.closing = true }
        if self.closing {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

extension RequestHead {
    /// What the classifier reads of an HTTP request head.
    init(_ request: HTTPRequest) {
        self.init(
            method: request.method.rawValue, target: request.path ?? "", contentLength: request.headerFields[.contentLength],
            hasTransferEncoding: request.headerFields[.transferEncoding] != nil, hasOrigin: request.headerFields[.origin] != nil,
            hasUpgrade: request.headerFields[.upgrade] != nil, connection: request.headerFields[values: .connection])
    }
}

extension HTTPRequest {
    /// `close` among the `Connection` header's tokens, in any case (``RequestHead/asksToClose``).
    var asksToClose: Bool { RequestHead(self).asksToClose }
}
