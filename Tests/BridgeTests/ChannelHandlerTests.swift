import DDP
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import Testing

@testable import Bridge

/// ``FrontDoor`` on an `EmbeddedChannel`, fed the parts `HTTP1ToHTTPServerCodec` delivers: what it
/// answers itself, what it hands to the router (recorded by ``ProbeSource``; the test writes the
/// router's answers), and in which order.
@Suite struct ChannelHandlerTests {

    // MARK: - Answered at the door

    @Test func healthzIsAnsweredOnTheConnection() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz")), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#))
            #expect(source.routedPaths == [], "an answered probe does not reach the router")
            #expect(source.answers == ["/healthz 200"])
            #expect(channel.isActive, "no Connection: close, so the connection stays open")
        }
    }

    /// `Content-Length: 0` is no body: still a plain GET.
    @Test func anEmptyDeclaredBodyIsStillAnswered() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz", [.contentLength: "0"])), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#))
            #expect(source.routedPaths == [])
        }
    }

    /// `/readyz` says what the readiness source says at the time of each request.
    @Test func readyzAnswersFromTheReadinessSource() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
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

            #expect(source.routedPaths == [])
            #expect(source.answers == ["/readyz 200", "/readyz 503"])
            #expect(channel.isActive)
        }
    }

    /// The rest of an answered request (its end) is dropped; the next request is the router's again.
    @Test func theRestOfAnAnsweredRequestIsDropped() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try channel.writeInbound(HTTPRequestPart.head(Self.request(.get, "/healthz")))
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#), "answered as the head arrives")
            try channel.writeInbound(HTTPRequestPart.end(nil))
            #expect(source.routedPaths == [])

            try Self.deliver(Self.parts(Self.request(.get, "/v1/session")), to: channel)
            #expect(source.routedPaths == ["/v1/session"])
            #expect(try Self.written(channel) == [])
        }
    }

    // MARK: - Handed to the router

    /// Requests the router answers: the door writes nothing for them and hands each on once,
    /// whole, with its body.
    @Test(arguments: ChannelHandlerTests.routerRequests)
    func requestsTheRouterAnswersAreHandedOnWhole(_ request: RouterRequest) throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(request.parts, to: channel)
            #expect(source.routedHeads == [request.head])
            #expect(source.routedBodies == [request.body ?? ""])
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

    /// A body is read up to the limit and one byte more (the route answers 413), no further.
    @Test func aBodyIsReadUpToTheLimitAndOneByteMore() throws {
        let source = ProbeSource(bodyLimit: 4)
        try Self.withChannel([source.handler()]) { channel, _ in
            try channel.writeInbound(HTTPRequestPart.head(Self.request(.post, "/v1/methods/echo", [.contentLength: "10"])))
            try channel.writeInbound(HTTPRequestPart.body(ByteBuffer(string: "012")))
            try channel.writeInbound(HTTPRequestPart.body(ByteBuffer(string: "3456789")))
            try channel.writeInbound(HTTPRequestPart.end(nil))
            #expect(source.routedBodies == ["01234"])
        }
    }

    /// The path is taken as the request gives it, query included: only the exact path is a probe.
    @Test func onlyTheExactPathIsAProbe() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz?verbose=1")), to: channel)
            #expect(source.lookups == [])
            #expect(source.routedPaths == ["/healthz?verbose=1"])
            #expect(try Self.written(channel) == [])
        }
    }

    /// Requests are answered in the order they came: a probe pipelined behind a request the
    /// router is answering waits for that answer's end, then the door answers it.
    @Test func aProbeBehindARoutedRequestWaitsForItsAnswer() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/session")), to: channel)
            try Self.deliver(Self.parts(Self.request(.get, "/healthz")), to: channel)
            #expect(source.routedPaths == ["/v1/session"])
            #expect(try Self.written(channel) == [], "the probe was answered before the answer ahead of it")

            let sessionResponse: [HTTPResponsePart] = [
                .head(HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"])),
                .body(ByteBuffer(string: "{}")),
                .end(nil)
            ]
            for part in sessionResponse { try channel.writeOutbound(part) }
            #expect(try Self.written(channel) == sessionResponse + Self.probeAnswer(.ok, #"{"status":"ok"}"#))
            #expect(source.answers == ["/healthz 200"])

            try Self.deliver(Self.parts(Self.request(.get, "/healthz")), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#), "answered at once again")
        }
    }

    // MARK: - Connection: close, upgrades, hang-ups

    /// A probe that asks to close is answered with `Connection: close`, then the connection closes.
    @Test(arguments: ["close", "Close", "keep-alive, close"])
    func connectionCloseIsAnsweredThenClosed(_ connection: String) throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz", [.connection: connection])), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#, [.connection: "close"]))
            #expect(Self.closeFutureFired(channel), "closed once the answer is written")
            #expect(!channel.isActive)
            #expect(source.routedPaths == [], "the end of the request is dropped too")
        }
    }

    /// A routed request that asks to close, or for an upgrade (the bridge offers none), is
    /// answered with `Connection: close`, and the connection closes after its end.
    @Test(arguments: [[HTTPField.Name.connection: "close"], [.connection: "Upgrade", .upgrade: "websocket"]] as [HTTPFields])
    func aRoutedRequestThatAsksToCloseClosesAfterItsAnswer(_ fields: HTTPFields) throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/session", fields)), to: channel)
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
            #expect(channel.isActive)
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            #expect(try Self.written(channel) == [.head(HTTPResponse(status: .ok, headerFields: [.connection: "close"])), .end(nil)])
            #expect(Self.closeFutureFired(channel))
        }
    }

    /// On a socket the answer's write may complete later than its request's successors arrive:
    /// while the connection closes, nothing the client pipelined behind a `Connection: close`
    /// probe reaches the router.
    @Test func nothingBehindAClosingProbeReachesTheRouter() throws {
        let source = ProbeSource()
        let held = HeldWrites()
        try Self.withChannel([held, source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz", [.connection: "close"])), to: channel)
            #expect(channel.isActive, "the answer's write has not completed: not closed yet")
            try Self.deliver(Self.parts(Self.request(.post, "/v1/sessions", [.contentLength: "2"]), body: "{}"), to: channel)
            #expect(source.routedPaths == [], "a request after Connection: close reached the router")
            held.release()
            #expect(!channel.isActive, "closed once the answer is written")
            _ = try Self.written(channel)
        }
    }

    /// `100 Continue` for a request pipelined behind an answer still being written goes out once
    /// that answer has ended, not into its body.
    @Test func aContinueBehindAnAnswerWaitsForItsEnd() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/events")), to: channel)
            try channel.writeOutbound(HTTPResponsePart.head(Self.eventStream()))
            try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(string: "event: ready\n\n")))
            try channel.writeInbound(HTTPRequestPart.head(Self.request(.post, "/v1/methods/echo", [.contentLength: "2", .expect: "100-continue"])))
            #expect(try Self.written(channel) == [.head(Self.eventStream()), .body(ByteBuffer(string: "event: ready\n\n"))])
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            #expect(try Self.written(channel) == [.end(nil), .head(HTTPResponse(status: .continue))], "owed, and sent after the end")
            try channel.writeInbound(HTTPRequestPart.body(ByteBuffer(string: "[]")))
            try channel.writeInbound(HTTPRequestPart.end(nil))
            #expect(source.routedPaths == ["/v1/events", "/v1/methods/echo"])
            #expect(source.routedBodies == ["", "[]"])
        }
    }

    @Test func keepAliveIsNotTakenForClose() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/healthz", [.connection: "keep-alive"])), to: channel)
            #expect(try Self.written(channel) == Self.probeAnswer(.ok, #"{"status":"ok"}"#), "no Connection header")
            #expect(channel.isActive)
            #expect(!Self.closeFutureFired(channel))
        }
    }

    /// A client that half-closes between requests has nothing more to ask: the connection closes.
    @Test func aHangUpBetweenRequestsClosesTheConnection() throws {
        try Self.withChannel([ProbeSource().handler()]) { channel, recorder in
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(Self.closeFutureFired(channel))
            #expect(recorder.events == [], "the door took the event")
        }
    }

    /// A client that half-closes while its request is answered gets the answer, then the close.
    @Test func aHangUpDuringAnAnswerClosesAfterIt() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/session")), to: channel)
            let response: [HTTPResponsePart] = [
                .head(HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"])),
                .body(ByteBuffer(string: #"{"ok":true}"#)),
                .end(nil)
            ]
            try channel.writeOutbound(response[0])
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            #expect(channel.isActive, "closed under the answer")
            try channel.writeOutbound(response[1])
            try channel.writeOutbound(response[2])
            #expect(try Self.written(channel) == response)
            #expect(Self.closeFutureFired(channel), "open after the last answer to a client that hung up")
        }
    }

    /// Only the input closing is the door's: other events pass on.
    @Test func otherEventsPassOn() throws {
        try Self.withChannel([ProbeSource().handler()]) { channel, recorder in
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(ChannelEvent.outputClosed)
            #expect(recorder.events == [.outputClosed])
            #expect(channel.isActive)
        }
    }

    // MARK: - What the parser refuses

    /// A request the HTTP parser refuses is answered in the bridge's error shape (431 for a head
    /// too large), counted, and the connection closed.
    @Test(arguments: [(HTTPParserError.headerOverflow, 431), (.invalidHeaderToken, 400)] as [(HTTPParserError, Int)])
    func aRequestTheParserRefusesIsAnsweredCountedAndClosed(_ error: HTTPParserError, _ status: Int) throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            channel.pipeline.fireErrorCaught(error)
            let parts = try Self.written(channel)
            guard case .head(let head) = parts.first else {
                Issue.record("no answer: \(parts)")
                return
            }
            #expect(Int(head.status.code) == status)
            #expect(head.headerFields[.connection] == "close")
            #expect(head.headerFields[.contentType] == "application/json")
            #expect(source.answers == ["unparsed \(status)"])
            #expect(Self.closeFutureFired(channel))
        }
    }

    /// One refused behind an answer being written waits for it.
    @Test func aParseErrorBehindAnAnswerWaitsForIt() throws {
        let source = ProbeSource()
        try Self.withChannel([source.handler()]) { channel, _ in
            try Self.deliver(Self.parts(Self.request(.get, "/v1/session")), to: channel)
            channel.pipeline.fireErrorCaught(HTTPParserError.invalidHeaderToken)
            #expect(try Self.written(channel) == [])
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            let parts = try Self.written(channel)
            #expect(parts.count == 5, "the answer, then the refusal: \(parts)")
            #expect(Self.closeFutureFired(channel))
        }
    }
}

// MARK: - Helpers

extension ChannelHandlerTests {
    /// What reached the end of the pipeline past the door: request parts (none should) and channel events.
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

    /// What the door is given in place of the bridge's: the probes' answers, from an upstream
    /// state the test sets, the router (a record of the requests handed to it), and a record of
    /// what it was asked and told.
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

        /// Requests handed to the router, with their bodies.
        let routed = NIOLockedValueBox<[(HTTPRequest, String)]>([])
        let bodyLimit: Int

        init(bodyLimit: Int = 1 << 20) { self.bodyLimit = bodyLimit }

        var routedHeads: [HTTPRequest] { routed.withLockedValue { $0.map(\.0) } }
        var routedPaths: [String] { routedHeads.map { $0.path ?? "" } }
        var routedBodies: [String] { routed.withLockedValue { $0.map(\.1) } }
        var lookups: [String] { asked.withLockedValue { $0 } }
        var answers: [String] { answered.withLockedValue { $0 } }

        func answer(_ probe: RequestDecision.Probe) -> ProbeAnswer {
            asked.withLockedValue { $0.append("\(probe)") }
            switch probe {
            case .health:
                return ProbeAnswer.health
            case .readiness:
                let state = upstream.withLockedValue { $0 }
                return ProbeAnswer.readiness(state.connection, failure: state.failure, sessions: 3, shuttingDown: false)
            }
        }

        func handler() -> FrontDoor {
            let source = self
            return FrontDoor(
                FrontDoor.Rooms(
                    answer: { probe in source.answer(probe) },
                    route: { request in
                        source.routed.withLockedValue { $0.append((request.head, String(buffer: request.body))) }
                        return true
                    },
                    answered: { path, status in source.answered.withLockedValue { $0.append("\(path) \(status.code)") } },
                    bodyLimit: bodyLimit))
        }
    }

    /// A request for the router, named for the test report.
    struct RouterRequest: Sendable, CustomTestStringConvertible {
        let name: String
        let head: HTTPRequest
        let body: String?
        var parts: [HTTPRequestPart] { ChannelHandlerTests.parts(head, body: body) }

        init(_ name: String, _ request: HTTPRequest, body: String? = nil) {
            self.name = name
            self.head = request
            self.body = body
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

extension FrontDoor.Rooms {
    /// A door that hands nothing on (for tests of what follows it).
    static let inert = FrontDoor.Rooms(answer: { _ in ProbeAnswer.health }, route: { _ in false }, answered: { _, _ in })
}
