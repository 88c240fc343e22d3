import DDP
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

@testable import Bridge

/// ``ProbeFastPath`` and ``EventStreamHangUp`` on an `EmbeddedChannel`, fed the parts
/// `HTTP1ToHTTPServerCodec` delivers, with a recorder after them for what the router would see.
@Suite struct ChannelHandlerTests {

    // MARK: - ProbeFastPath: answered here

    @Test func healthzIsAnsweredOnTheConnection() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz")), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#))
            #expect(recorder.parts == [], "an answered probe does not reach the router")
            #expect(source.answers == ["/healthz 200"])
            #expect(channel.isActive, "no Connection: close, so the connection stays open")
        }
    }

    /// `Content-Length: 0` is no body: still a plain GET.
    @Test func anEmptyDeclaredBodyIsStillAnswered() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz", [.contentLength: "0"])), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#))
            #expect(recorder.parts == [])
        }
    }

    /// `/readyz` says what the readiness source says at the time of each request.
    @Test func readyzAnswersFromTheReadinessSource() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/readyz")), to: channel)
            #expect(
                try Self.written(channel)
                    == Self.probeAnswer(.ok, #"{"status":"ready","upstream":{"state":"connected","ddpSession":"s1","version":"1"},"sessions":3}"#))

            source.upstream.withLockedValue {
                let refused = UpstreamFailure(.connectionRefused(endpoint: "127.0.0.1:3999"), url: "ws://127.0.0.1:3999/websocket")
                $0 = ProbeSource.Upstream(connection: .reconnecting(attempt: 2, delay: .seconds(7), cause: refused), failure: refused)
            }
            try Self.deliver(Self.parts(Self.request(.get, "/readyz")), to: channel)
            let cause = "nothing is listening at 127.0.0.1:3999 (connection refused)"
            let reason = "The upstream Meteor server is not reachable: \(cause)"
            let unavailable: String =
                #"{"error":"upstream-unavailable","reason":"\#(reason)","message":"\#(reason) [upstream-unavailable]","#
                + #""details":{"upstream":{"state":"reconnecting","attempt":2,"retryIn":7000,"reason":"\#(cause)"},"#
                + #""cause":{"code":"connection-refused","message":"\#(cause)","#
                + #""hint":"start the Meteor app, or correct the host and port of the upstream URL"}}}"#
            #expect(try Self.written(channel) == Self.probeAnswer(.serviceUnavailable, unavailable, [.retryAfter: "7"]))

            #expect(recorder.parts == [])
            #expect(source.answers == ["/readyz 200", "/readyz 503"])
            #expect(channel.isActive)
        }
    }

    /// The rest of an answered request (its end) is dropped; the next request is the router's again.
    @Test func theRestOfAnAnsweredRequestIsDropped() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            try channel.writeInbound(HTTPRequestPart.head(Self.request(.get, "/healthz")))
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#), "answered as the head arrives")
            try channel.writeInbound(HTTPRequestPart.end(nil))
            #expect(recorder.parts == [])

            let next = Self.parts(Self.request(.get, "/v1/session"))
            try Self.deliver(next, to: channel)
            #expect(recorder.parts == next)
            #expect(try Self.written(channel) == [])
        }
    }

    // MARK: - ProbeFastPath: left to the router

    /// Requests that must reach the router unchanged: the fast path writes nothing for them.
    @Test(arguments: ChannelHandlerTests.routerRequests)
    func requestsTheRouterMustSeePassThrough(_ request: RouterRequest) throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            try Self.deliver(request.parts, to: channel)
            #expect(recorder.parts == request.parts)
            #expect(try Self.written(channel) == [])
            #expect(source.answers == [])
        }
    }

    static let routerRequests: [RouterRequest] = [
        RouterRequest("with an Origin (CORS is the router's)", request(.get, "/healthz", [.origin: "https://console.example"])),
        RouterRequest("HEAD", request(.head, "/healthz")),
        RouterRequest("POST", request(.post, "/readyz", [.contentLength: "0"])),
        RouterRequest("with a body", request(.get, "/healthz", [.contentLength: "2"]), body: "{}"),
        RouterRequest("chunked", request(.get, "/readyz", [.transferEncoding: "chunked"]), body: "x"),
        RouterRequest("asking for an upgrade", request(.get, "/healthz", [.connection: "Upgrade", .upgrade: "websocket"])),
        RouterRequest("another path", request(.get, "/v1/sessions")),
        RouterRequest("a probe path with a query", request(.get, "/healthz?verbose=1"))
    ]

    /// The path is looked up as the request gives it, query included: only the exact path is a probe.
    @Test func thePathIsLookedUpAsGiven() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            let request = Self.parts(Self.request(.get, "/healthz?verbose=1"))
            try Self.deliver(request, to: channel)
            #expect(source.lookups == ["/healthz?verbose=1"])
            #expect(recorder.parts == request)
            #expect(try Self.written(channel) == [])
        }
    }

    /// While a request passed to the router is unanswered, probes go to the router too (so
    /// responses stay in order); once every response has ended, the fast path answers again.
    @Test func probesWaitForUnansweredRequests() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            let session = Self.parts(Self.request(.get, "/v1/session"))
            let firstProbe = Self.parts(Self.request(.get, "/healthz"))
            try Self.deliver(session, to: channel)
            try Self.deliver(firstProbe, to: channel)
            #expect(recorder.parts == session + firstProbe, "pipelined behind /v1/session")
            #expect(try Self.written(channel) == [])

            // The router answers /v1/session; the first probe it was given is still unanswered.
            let sessionResponse: [HTTPResponsePart] = [
                .head(HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"])),
                .body(ByteBuffer(string: "{}")),
                .end(nil)
            ]
            for part in sessionResponse { try channel.writeOutbound(part) }
            #expect(try Self.written(channel) == sessionResponse, "the router's response passes unchanged")

            let secondProbe = Self.parts(Self.request(.get, "/healthz"))
            try Self.deliver(secondProbe, to: channel)
            #expect(recorder.parts == session + firstProbe + secondProbe, "the first probe is still unanswered")

            // The router answers both probes it was given.
            let routerProbeAnswer: [HTTPResponsePart] = [.head(HTTPResponse(status: .ok)), .end(nil)]
            for part in routerProbeAnswer + routerProbeAnswer { try channel.writeOutbound(part) }
            #expect(try Self.written(channel) == routerProbeAnswer + routerProbeAnswer)

            try Self.deliver(Self.parts(Self.request(.get, "/healthz")), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#))
            #expect(recorder.parts == session + firstProbe + secondProbe, "answered here, not passed on")
            #expect(source.answers == ["/healthz 200"])
        }
    }

    // MARK: - ProbeFastPath: Connection: close

    /// A probe that asks to close is answered with `Connection: close`, then the connection closes.
    @Test(arguments: ["close", "Close", "keep-alive, close"])
    func connectionCloseIsAnsweredThenClosed(_ connection: String) throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz", [.connection: connection])), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#, [.connection: "close"]))
            #expect(Self.closeFutureFired(channel), "closed once the answer is written")
            #expect(!channel.isActive)
            #expect(recorder.parts == [], "the end of the request is dropped too")
        }
    }

    /// On a socket the answer's write may complete later than its request's successors arrive:
    /// while the connection closes, nothing the client pipelined behind a `Connection: close`
    /// probe reaches the router.
    @Test func nothingBehindAClosingProbeReachesTheRouter() throws {
        let source = ProbeSource()
        let held = HeldWrites()
        try Self.withChannel([held, source.handler()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz", [.connection: "close"])), to: channel)
            #expect(channel.isActive, "the answer's write has not completed: not closed yet")
            try Self.deliver(Self.parts(Self.request(.post, "/v1/sessions", [.contentLength: "2"]), body: "{}"), to: channel)
            #expect(recorder.parts == [], "a request after Connection: close reached the router")
            held.release()
            #expect(!channel.isActive, "closed once the answer is written")
            _ = try Self.written(channel)
        }
    }

    /// A `100 Continue` written during an event stream (owed to a request pipelined behind it)
    /// is no final response: the stream's hang-up is still seen.
    @Test func anInformationalHeadDoesNotEndTheStreamsWatch() throws {
        try Self.withChannel([EventStreamHangUp()]) { channel, _ in
            try channel.writeOutbound(HTTPResponsePart.head(Self.eventStream()))
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .continue)))
            channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(!channel.isActive, "the hang-up during the stream went unseen")
            _ = try Self.written(channel)
        }
    }

    /// `100 Continue` for a request pipelined behind a response still being written goes out
    /// once that response has ended, not into its body.
    @Test func aContinueBehindAResponseWaitsForItsEnd() throws {
        try Self.withChannel([ProbeSource().handler()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/events")), to: channel)
            try channel.writeOutbound(HTTPResponsePart.head(Self.eventStream()))
            try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(string: "event: ready\n\n")))
            try channel.writeInbound(HTTPRequestPart.head(Self.request(.post, "/v1/methods/echo", [.contentLength: "2", .expect: "100-continue"])))
            #expect(recorder.parts.count == 3, "the request goes on to the router")
            #expect(try Self.written(channel) == [.head(Self.eventStream()), .body(ByteBuffer(string: "event: ready\n\n"))])
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            #expect(try Self.written(channel) == [.end(nil), .head(HTTPResponse(status: .continue))], "owed, and sent after the end")
        }
    }

    @Test func keepAliveIsNotTakenForClose() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz", [.connection: "keep-alive"])), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#), "no Connection header")
            #expect(channel.isActive)
            #expect(!Self.closeFutureFired(channel))
        }
    }

    // MARK: - EventStreamHangUp

    /// The client's FIN during a stream closes the connection at once, so the close future ends
    /// the stream; the event itself goes no further.
    @Test func aHangUpDuringAStreamClosesTheConnection() throws {
        try Self.withChannel([EventStreamHangUp()]) { channel, recorder in
            let request = Self.parts(Self.request(.get, "/v1/events", [.accept: "text/event-stream"]))
            try Self.deliver(request, to: channel)
            #expect(recorder.parts == request, "requests pass unchanged")

            let stream: [HTTPResponsePart] = [.head(Self.eventStream()), .body(ByteBuffer(string: "event: connection\ndata: {}\n\n"))]
            for part in stream { try channel.writeOutbound(part) }
            #expect(try Self.written(channel) == stream, "stream parts pass unchanged")
            #expect(channel.isActive)

            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(!channel.isActive)
            #expect(Self.closeFutureFired(channel))
            #expect(recorder.events == [])
        }
    }

    /// A FIN that comes before the stream's head: the head is sent (flushed by the handler), then
    /// the connection closes.
    @Test func aHangUpBeforeTheStreamClosesOnceItsHeadIsSent() throws {
        try Self.withChannel([EventStreamHangUp()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/events")), to: channel)
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(recorder.events == [.inputClosed], "nothing is streaming yet: the event goes on")
            #expect(channel.isActive)

            let head = HTTPResponsePart.head(Self.eventStream("text/event-stream; charset=utf-8"))
            channel.write(head, promise: nil)  // not flushed here: the handler must flush it
            #expect(try Self.written(channel) == [head])
            #expect(!channel.isActive)
            #expect(Self.closeFutureFired(channel))
        }
    }

    /// Other responses to a half-closed client are left to finish.
    @Test func otherResponsesToAHalfClosedClientFinish() throws {
        try Self.withChannel([EventStreamHangUp()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/session")), to: channel)
            let response: [HTTPResponsePart] = [
                .head(HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"])),
                .body(ByteBuffer(string: #"{"ok":true}"#)),
                .end(nil)
            ]
            try channel.writeOutbound(response[0])
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(recorder.events == [.inputClosed])
            #expect(channel.isActive)

            try channel.writeOutbound(response[1])
            try channel.writeOutbound(response[2])
            #expect(try Self.written(channel) == response)
            #expect(channel.isActive)
            #expect(!Self.closeFutureFired(channel))
        }
    }

    /// A stream that has ended is no longer watched.
    @Test func aHangUpAfterAStreamEndedIsPassedOn() throws {
        try Self.withChannel([EventStreamHangUp()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/events")), to: channel)
            let stream: [HTTPResponsePart] = [.head(Self.eventStream()), .body(ByteBuffer(string: "data: {}\n\n")), .end(nil)]
            for part in stream { try channel.writeOutbound(part) }
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(try Self.written(channel) == stream)
            #expect(recorder.events == [.inputClosed])
            #expect(channel.isActive)
        }
    }

    /// Only the input closing counts: other events pass on during a stream.
    @Test func otherEventsPassDuringAStream() throws {
        try Self.withChannel([EventStreamHangUp()]) { channel, recorder in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/events")), to: channel)
            try channel.writeOutbound(HTTPResponsePart.head(Self.eventStream()))
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.outputClosed)
            #expect(recorder.events == [.outputClosed])
            #expect(channel.isActive)
            #expect(try Self.written(channel) == [.head(Self.eventStream())])
        }
    }

    // MARK: - Both, as ProbingHTTP1Channel.setup wires them

    /// A probe pipelined behind a running stream goes to the router (the stream is unanswered);
    /// the client's FIN then closes the connection.
    @Test func aProbeBehindAStreamWaitsAndTheHangUpStillCloses() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler(), EventStreamHangUp()]) { channel, recorder in
            let events = Self.parts(Self.request(.get, "/v1/events", [.accept: "text/event-stream"]))
            let probe = Self.parts(Self.request(.get, "/healthz"))
            try Self.deliver(events, to: channel)
            try channel.writeOutbound(HTTPResponsePart.head(Self.eventStream()))
            try Self.deliver(probe, to: channel)
            #expect(recorder.parts == events + probe)
            #expect(try Self.written(channel) == [.head(Self.eventStream())])

            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(!channel.isActive)
            #expect(recorder.events == [])
            #expect(source.answers == [])
        }
    }
}

// MARK: - Helpers

extension ChannelHandlerTests {
    /// What reached the end of the pipeline: request parts and channel events. It passes nothing on.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = HTTPRequestPart

        private(set) var parts: [HTTPRequestPart] = []
        private(set) var events: [ChannelEvent] = []

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            parts.append(unwrapInboundIn(data))
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let event = event as? ChannelEvent { events.append(event) }
        }
    }

    /// What the fast path is given in place of `BridgeRoutes.probeAnswer`: the same answers, from an
    /// upstream state the test sets, and a record of what it was asked and told.
    struct ProbeSource: Sendable {
        struct Upstream: Sendable {
            var connection: ConnectionState
            var failure: UpstreamFailure?
        }

        let upstream = NIOLockedValueBox(Upstream(connection: .connected(session: "s1", version: "1"), failure: nil))
        /// Paths the fast path asked for an answer.
        let asked = NIOLockedValueBox<[String]>([])
        /// Answers the fast path reported sending, as "path status".
        let answered = NIOLockedValueBox<[String]>([])

        var lookups: [String] { asked.withLockedValue { $0 } }
        var answers: [String] { answered.withLockedValue { $0 } }

        func answer(_ path: String) -> ProbeAnswer? {
            asked.withLockedValue { $0.append(path) }
            switch path {
            case "/healthz":
                return ProbeAnswer.health
            case "/readyz":
                let state = upstream.withLockedValue { $0 }
                return ProbeAnswer.readiness(state.connection, failure: state.failure, sessions: 3, shuttingDown: false)
            default:
                return nil
            }
        }

        func handler() -> ProbeFastPath {
            let source = self
            return ProbeFastPath(
                answer: { path in source.answer(path) },
                answered: { path, status in source.answered.withLockedValue { $0.append("\(path) \(status.code)") } })
        }
    }

    /// A request for the router, named for the test report.
    struct RouterRequest: Sendable, CustomTestStringConvertible {
        let name: String
        let parts: [HTTPRequestPart]

        init(_ name: String, _ request: HTTPRequest, body: String? = nil) {
            self.name = name
            self.parts = ChannelHandlerTests.parts(request, body: body)
        }

        var testDescription: String { name }
    }

    /// Holds the promises of writes that pass it until ``release()``: a socket whose writes
    /// complete later than the next read.
    final class HeldWrites: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = HTTPResponsePart
        typealias OutboundOut = HTTPResponsePart
        private var promises: [EventLoopPromise<Void>] = []

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if let promise { promises.append(promise) }
            context.write(data, promise: nil)
        }

        func release() {
            let held = promises
            promises = []
            for promise in held { promise.succeed() }
        }
    }

    /// Runs `body` on a connected `EmbeddedChannel` (so `isActive` shows a close) holding
    /// `handlers` then a ``Recorder``; finishes the channel whatever happens, and expects every
    /// written part to have been read.
    static func withChannel(
        _ handlers: [any ChannelHandler], sourceLocation: SourceLocation = #_sourceLocation,
        _ body: (EmbeddedChannel, Recorder) throws -> Void
    ) throws {
        let recorder = Recorder()
        let channel = EmbeddedChannel(handlers: handlers + [recorder])
        var finished = false
        defer { if !finished { _ = try? channel.finish(acceptAlreadyClosed: true) } }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        try body(channel, recorder)
        finished = true
        let leftOvers = try channel.finish(acceptAlreadyClosed: true)
        #expect(leftOvers.isClean, "left on the channel: \(leftOvers)", sourceLocation: sourceLocation)
    }

    static func request(_ method: HTTPRequest.Method, _ path: String, _ fields: HTTPFields = [:]) -> HTTPRequest {
        HTTPRequest(method: method, scheme: "http", authority: "bridge.test", path: path, headerFields: fields)
    }

    /// A request as `HTTP1ToHTTPServerCodec` delivers it: head, the body if any, end.
    static func parts(_ request: HTTPRequest, body: String? = nil) -> [HTTPRequestPart] {
        var parts: [HTTPRequestPart] = [.head(request)]
        if let body { parts.append(.body(ByteBuffer(string: body))) }
        parts.append(.end(nil))
        return parts
    }

    static func deliver(_ parts: [HTTPRequestPart], to channel: EmbeddedChannel) throws {
        for part in parts { try channel.writeInbound(part) }
    }

    /// Every part written and flushed to the channel since the last call.
    /// What the handler wrote, each head without its `Date` (the wall clock's; its presence and
    /// form are checked through real sockets, in `probesAnsweredOnTheEventLoopMatchTheRoutersAnswers`).
    static func written(_ channel: EmbeddedChannel) throws -> [HTTPResponsePart] {
        var parts: [HTTPResponsePart] = []
        while let part = try channel.readOutbound(as: HTTPResponsePart.self) {
            if case .head(var head) = part {
                head.headerFields[.date] = nil
                parts.append(.head(head))
            } else {
                parts.append(part)
            }
        }
        return parts
    }

    /// A probe answer as the fast path writes it: `ProbeAnswer`'s headers (JSON, the security
    /// headers, `extra`) and `Content-Length`, the JSON body, the end.
    static func probeAnswer(_ status: HTTPResponse.Status, _ json: String, _ extra: HTTPFields = [:]) -> [HTTPResponsePart] {
        let body = Array(json.utf8)
        var fields: HTTPFields = [
            .contentType: "application/json",
            .contentSecurityPolicy: SecurityHeadersMiddleware.contentSecurityPolicy,
            .xContentTypeOptions: "nosniff",
            SecurityHeadersMiddleware.referrerPolicy: "no-referrer"
        ]
        fields.append(contentsOf: extra)
        fields[.contentLength] = String(body.count)
        return [.head(HTTPResponse(status: status, headerFields: fields)), .body(ByteBuffer(bytes: body)), .end(nil)]
    }

    static func eventStream(_ contentType: String = "text/event-stream") -> HTTPResponse {
        HTTPResponse(status: .ok, headerFields: [.contentType: contentType, .cacheControl: "no-store"])
    }

    /// Whether the channel's close future has completed, once its event loop has run.
    static func closeFutureFired(_ channel: EmbeddedChannel) -> Bool {
        let fired = NIOLockedValueBox(false)
        channel.closeFuture.whenComplete { _ in fired.withLockedValue { $0 = true } }
        channel.embeddedEventLoop.run()
        return fired.withLockedValue { $0 }
    }
}
