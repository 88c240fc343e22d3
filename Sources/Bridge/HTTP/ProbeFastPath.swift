import DDP
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTPTypes
import Timing

/// What `GET /healthz` and `GET /readyz` answer: status, headers and body, built without
/// waiting on anything, so the router and ``ProbeFastPath`` send the same bytes.
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

/// Answers `GET /healthz` and `GET /readyz` on the connection's event loop, before the request
/// reaches Hummingbird's per-connection task: a probe is answered even while every worker of
/// Swift's cooperative pool is busy with session work (under load it waited there up to 130 ms).
///
/// It also opens an event stream there when nothing needs waiting for (a public reader of a
/// subscription that is ready, a stream of a session held here: ``BridgeRoutes/openStreamOnLoop(_:on:)``),
/// so opening a reader costs no task and no hop to the request path; the stream's writer takes the
/// connection as it does a routed stream's (``StreamAnchor/install(_:on:opening:)``).
///
/// It steps in only when it cannot change what the client sees: the connection has no other
/// request unanswered (so responses stay in order), the request is a plain `GET` of the exact path
/// with no body and no `Origin` (CORS stays with the router). Anything else passes through to the
/// router, which answers the same ``ProbeAnswer``. One instance per connection, used only on its
/// event loop.
///
/// It keeps the connection's requests in order, so it also sends `Expect: 100-continue`'s
/// `100 Continue`: as the request head arrives when no response is being written, else once the
/// responses before it have ended (written at once, it landed inside an event stream's body);
/// and the answer to a request that asked to close (`Connection: close`, a token in any case)
/// says `Connection: close`. Here rather than in a handler of its own: every handler that looks
/// at each response part costs a cast per write, which measured on a stream's delivery.
final class ProbeFastPath: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let answer: @Sendable (String) -> ProbeAnswer?
    private let openStream: @Sendable (HTTPRequest, any Channel) -> LoopOpening
    private let answered: @Sendable (String, HTTPResponse.Status) -> Void
    /// The `Date` header Hummingbird adds to every routed answer, added here too.
    private let date: HTTPDate
    /// A request passed on to the router whose response has not ended yet.
    private struct Unanswered {
        /// It waits for its `100 Continue` (owed once its turn comes).
        var owesContinue: Bool
        /// It asked to close the connection: its answer says `Connection: close`.
        let closes: Bool
    }
    /// Those requests, oldest first.
    private var unanswered: [Unanswered] = []
    /// The rest (body parts, end) of a request answered here, to be dropped.
    private var discarding = false
    /// A `Connection: close` probe was answered: whatever the client sent after it is dropped
    /// (the connection is closing; the router must not start on it meanwhile).
    private var closing = false

    /// - Parameters:
    ///   - answer: the answer for a path, or `nil` for a path this handler leaves alone.
    ///   - openStream: an event stream opened for a request without waiting on anything (a public
    ///     stream of a subscription that is ready: ``BridgeRoutes/openStreamOnLoop(_:on:)``), its
    ///     refusal, or `.route`, with nothing taken, for a request the router answers.
    ///   - answered: told of each answer sent here (for request metrics).
    init(
        answer: @escaping @Sendable (String) -> ProbeAnswer?,
        openStream: @escaping @Sendable (HTTPRequest, any Channel) -> LoopOpening = { _, _ in .route },
        date: HTTPDate = HTTPDate(clock: .system),
        answered: @escaping @Sendable (String, HTTPResponse.Status) -> Void
    ) {
        self.answer = answer
        self.date = date
        self.openStream = openStream
        self.answered = answered
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let part = unwrapInboundIn(data)
        switch part {
        case .head(let request):
            if unanswered.isEmpty, let path = request.path, Self.isPlainGet(request) {
                if let probe = answer(path) {
                    discarding = true
                    closing = request.asksToClose
                    send(probe, closing: closing, context: context)
                    answered(path, probe.status)
                    return
                }
                if !request.asksToClose {
                    switch openStream(request, context.channel) {
                    case .stream(let opened):
                        discarding = true
                        start(opened, context: context)
                        return
                    case .refuse(let refusal, let route):
                        discarding = true
                        send(refusal, closing: false, context: context)
                        answered(route, refusal.status)
                        return
                    case .route:
                        break
                    }
                }
            }
            unanswered.append(
                Unanswered(
                    owesContinue: request.headerFields[values: .expect].contains { $0.lowercased() == "100-continue" },
                    closes: request.asksToClose))
            if unanswered.count == 1 { sendContinueIfOwed(context: context) }
            context.fireChannelRead(data)
        case .body, .end:
            if discarding {
                if case .end = part { discarding = false }
                return
            }
            context.fireChannelRead(data)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where response.status.kind != .informational && unanswered.first?.closes == true:
            // The request asked to close: its answer says so (RFC 9112 §9.6); the request loop
            // closes the connection after it (``ProbingHTTP1Channel``).
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end:
            context.write(data, promise: promise)
            // This response is done: the next request's turn (its `100 Continue`, if owed, follows it).
            if !unanswered.isEmpty { unanswered.removeFirst() }
            sendContinueIfOwed(context: context)
        default:
            context.write(data, promise: promise)
        }
    }

    /// `100 Continue` for the request whose turn it is, if it asked and has not had it.
    private func sendContinueIfOwed(context: ChannelHandlerContext) {
        guard unanswered.first?.owesContinue == true else { return }
        unanswered[0].owesContinue = false
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
    }

    /// A `GET` without a body, an `Origin` (CORS stays with the router) or an upgrade (left to
    /// ``HTTP1Hygiene``): the only requests answered here.
    private static func isPlainGet(_ request: HTTPRequest) -> Bool {
        request.method == .get && request.headerFields[.contentLength] ?? "0" == "0" && request.headerFields[.transferEncoding] == nil
            && request.headerFields[.origin] == nil && request.headerFields[.upgrade] == nil
    }

    /// Hands the connection to an event stream opened here: its writer writes the response's head
    /// and first bytes and ends the request loop (``StreamAnchor/install(_:on:opening:)``).
    private func start(_ opened: LoopStream, context: ChannelHandlerContext) {
        let channel = context.channel
        var head = opened.head
        head.headerFields[.date] = date.now
        guard StreamAnchor.install(opened.stream, on: channel, opening: (head, opened.body)) else {
            // The connection is going: its close releases what the stream held.
            channel.close(promise: nil)
            return
        }
        answered(opened.route, opened.head.status)
    }

    private func send(_ probe: ProbeAnswer, closing: Bool, context: ChannelHandlerContext) {
        var response = HTTPResponse(status: probe.status, headerFields: probe.headers)
        response.headerFields[.date] = date.now
        response.headerFields[.contentLength] = String(probe.body.count)
        if closing { response.headerFields[.connection] = "close" }
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: probe.body))), promise: nil)
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if closing {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }

}
