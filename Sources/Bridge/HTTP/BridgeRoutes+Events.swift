import DDP
import DDPClient
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Tracing

extension BridgeRoutes {
    /// `GET /v1/events`: the session's live changes as Server-Sent Events.
    ///
    /// Query: `collections` (comma-separated), `id` (one document; one collection), `selector`
    /// (a live query; one collection), `snapshot=true`, `subscribe` + `params` (a subscription the
    /// stream holds while it is open), `lastEventId` (or the `Last-Event-ID` header).
    ///
    /// The opening's steps are the event loop's door's (``openSessionStream(_:_:on:)``), in the
    /// same order and by the same functions; the route then waits where the door would not (a
    /// session to look up or bring back, a subscription to make ready).
    @Sendable func events(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let query = try StreamQuery(request)
        var start = try sessionStreamStart(query, request.headers).start
        let session = try await session(request, context)
        let filter: StreamFilter
        switch try attachAtOnce(query, start: start, to: session, on: context.channel.eventLoop) {
        case .attached(let stream):
            return sseResponse(stream, request, context) { session.detach(stream) }
        case .mustWait(let waiting):
            filter = waiting
        }
        let owned = try query.subscription()
        var subscription: SubscriptionInfo?
        if let owned {
            try await session.waitUntilConnected(timeout: settings.connectTimeout)
            // A live stream attaches once its subscription is ready, and so starts from the log as
            // it was before subscribing: the subscription's documents and every change made while
            // it got ready reach the stream (they were lost, and `curl -N` of a publication showed
            // nothing until its next change), written at the consumer's pace; a load larger than the
            // log gives a reset and a snapshot. A live query cannot replay and starts as it did.
            if start.isLive, filter.selector == nil { start = .resume(after: session.logPosition()) }
            subscription = try await session.subscribe(
                owned.name, params: owned.params, wait: true, timeout: settings.requestTimeout, transient: true)
        }
        let ownedID = subscription?.id
        let stream = makeStream(filter, counters: registry.metrics.sessionStreams, on: context.channel.eventLoop)
        do {
            try await session.attach(stream, start: start)
        } catch {
            if let subscription { _ = session.unsubscribe(subscription.id, transient: true) }
            throw error
        }
        return sseResponse(stream, request, context) {
            session.detach(stream)
            if let ownedID { _ = session.unsubscribe(ownedID, transient: true) }
        }
    }

    /// `GET /v1/events` on its connection's event loop (``FrontDoor``): the route's steps
    /// (``events(_:_:)``) as far as they go without waiting: where the stream starts, a
    /// credential (before anything is parsed in proportion to the request), the session when this
    /// bridge holds it (``SessionRegistry/heldSession(token:)``), then ``attachAtOnce(_:start:to:on:)``.
    /// A refusal is the route's, the same bytes; a stream that must wait is left to the route,
    /// with nothing taken.
    func openSessionStream(_ query: StreamQuery, _ head: HTTPRequest, on channel: any Channel) -> LoopOpening {
        let route = "/v1/events"
        do {
            let (start, token) = try sessionStreamStart(query, head.headerFields)
            guard SessionToken.isSessionToken(token), let session = registry.heldSession(token: token) else { return .route }
            guard case .attached(let stream) = try attachAtOnce(query, start: start, to: session, on: channel.eventLoop) else { return .route }
            session.touch()
            return .stream(loopStream(stream, on: channel, route: route) { session.detach(stream) })
        } catch {
            return .refuse(ProbeAnswer(error), route: route)
        }
    }

    /// The first step of a session stream's opening, on both doors: where it starts, and the
    /// credential the request carries (401 before anything is parsed in proportion to it).
    func sessionStreamStart(_ query: StreamQuery, _ headers: HTTPFields) throws(BridgeError) -> (start: Session.StreamStart, token: String) {
        let start = try query.start()
        guard let token = RequestInput.credential(headers)?.token ?? query.token else {
            throw BridgeError(.noSession, Self.noSessionReason(authorization: headers[.authorization]))
        }
        return (start, token)
    }

    /// How a stream's opening went without waiting (``attachAtOnce(_:start:to:on:)``).
    enum AtOnce {
        /// Attached, from the session's log.
        case attached(EventStream)
        /// It must wait (a subscription to make ready, a snapshot or a live query to read from the
        /// cache on the client's actor, a refusal the session decides): nothing was taken.
        case mustWait(StreamFilter)
    }

    /// The second step, on both doors, once the session is known: the filter is read (400), and a
    /// stream that holds no subscription and starts from the log is attached at once
    /// (``Session/attachFromLog(_:start:)``).
    func attachAtOnce(_ query: StreamQuery, start: Session.StreamStart, to session: Session, on loop: any EventLoop) throws(BridgeError) -> AtOnce {
        let filter = try query.filter()
        guard !query.asksForSubscription, Session.mayAttachFromLog(filter, start: start) else { return .mustWait(filter) }
        let stream = makeStream(filter, counters: registry.metrics.sessionStreams, on: loop)
        return session.attachFromLog(stream, start: start) ? .attached(stream) : .mustWait(filter)
    }

    /// A stream with the bridge's buffer limit, stall timeout and clock, on its connection's loop.
    func makeStream(_ filter: StreamFilter, counters: StreamCounters, on loop: any EventLoop) -> EventStream {
        EventStream(
            filter: filter, limit: settings.streamBufferLimit, loop: loop, stallTimeout: settings.streamStallTimeout,
            clock: runtime.clock, counters: counters)
    }

    /// An event stream opened on the loop: counted until its connection closes, whose close ends
    /// it and runs `finally` (as a routed stream's close does, ``sseResponse(_:_:_:finally:)``), with
    /// the head and first bytes the router's answer has (the `Date` is added where it is written).
    func loopStream(_ stream: EventStream, on channel: any Channel, route: String, finally: @escaping @Sendable () -> Void) -> LoopStream {
        channel.closeFuture.whenComplete { _ in
            stream.finish(with: SSEFrame.heartbeat)
            finally()
        }
        registry.liveStreams.add(stream, until: channel.closeFuture)
        var fields = Self.sseHeaders
        SecurityHeadersMiddleware.add(to: &fields)
        return LoopStream(
            stream: stream, head: HTTPResponse(status: .ok, headerFields: fields),
            body: ByteBuffer(bytes: SSEFrame.retry(milliseconds: settings.streamRetryMilliseconds)), route: route)
    }

    /// A stream request on the loop (``FrontDoor``, which has checked its target): the public or
    /// the session stream, when it needs nothing waited for. Its query is decoded once, in
    /// proportion to its length; the credential or the publication is checked before anything
    /// else is parsed.
    @Sendable func openStreamOnLoop(_ door: RequestDecision.StreamDoor, _ head: HTTPRequest, on channel: any Channel) -> LoopOpening {
        guard let query = StreamQuery(query: head.path.flatMap { RequestClassifier.query(of: $0) }, headers: head.headerFields) else {
            return .route
        }
        let started = DefaultTracerClock.now
        let opening = door == .session ? openSessionStream(query, head, on: channel) : openPublicStream(query, head, on: channel)
        // Its span covers the opening, as a routed stream's does (``RequestTracing``).
        switch opening {
        case .stream: RequestTracing.opened(head, route: door == .session ? "/v1/events" : "/v1/public/events", status: .ok, at: started)
        case .refuse(let answer, let route): RequestTracing.opened(head, route: route, status: answer.status, at: started)
        case .route: break
        }
        return opening
    }

    /// `HEAD /v1/events`: what a `GET` would answer, checked the same way, with no stream opened
    /// and nothing subscribed (the generated HEAD route would run the `GET` and drop its body,
    /// leaving the stream attached for good).
    @Sendable func eventsHead(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let query = try StreamQuery(request)
        _ = try sessionStreamStart(query, request.headers)
        _ = try await session(request, context)
        _ = try query.filter()
        _ = try query.subscription()
        return Self.sseHead
    }

    static let sseHeaders: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache", .init("X-Accel-Buffering")!: "no"]
    /// The head of an event stream, for `HEAD` (no body, and no `Content-Length` taken from one).
    static var sseHead: Response { Response(status: .ok, headers: sseHeaders) }

    /// The `text/event-stream` response whose stream its connection's event loop writes
    /// (``StreamHandOff``) until it ends or its consumer goes away; `finally` runs exactly once
    /// after that (detach, release what the stream held).
    ///
    /// Once: from the connection's close, or from the body when the connection could not be
    /// handed over (it is gone) — whichever comes first. The close matters twice over: a consumer
    /// that hangs up ends the stream now, not at the next write; and when the connection is gone
    /// before the response starts (the client left while the route waited for the upstream),
    /// Hummingbird never runs the body at all, so without it the stream, its subscription
    /// reference and its reader count would leak.
    func sseResponse(_ stream: EventStream, _ request: Request, _ context: BridgeRequestContext, finally: @escaping @Sendable () -> Void)
        -> Response
    {
        let retry = settings.streamRetryMilliseconds
        let done = LockedState(false)
        let finish: @Sendable () -> Void = {
            let first = done.withLock { done in
                defer { done = true }
                return !done
            }
            if first { finally() }
        }
        context.connectionClosed.whenComplete { _ in
            stream.finish(with: SSEFrame.heartbeat)
            finish()
        }
        let streams = registry.liveStreams
        let channel = context.channel
        let body = ResponseBody { writer in
            do {
                try await writer.write(ByteBuffer(bytes: SSEFrame.retry(milliseconds: retry)))
                // The connection's event loop writes the stream from here: this task, and the
                // connection's, end. Shutdown reaches it through `liveStreams`.
                if await Self.handOff(stream, on: channel, streams: streams) { return }
            } catch {
                // The consumer went away; clean up below.
            }
            // Not handed over: the connection is gone (or, outside the bridge's own server, has
            // no writer). The stream ends with its response.
            finish()
            try? await writer.finish(nil)
        }
        return Response(status: .ok, headers: Self.sseHeaders, body: body)
    }

    /// Gives `stream` to its connection's event loop (``StreamHandOff``), counted in `streams`
    /// until the connection closes; `false` when the connection has no such writer or is gone.
    static func handOff(_ stream: EventStream, on channel: any Channel, streams: LiveStreams) async -> Bool {
        let adopted = try? await channel.eventLoop.submit { StreamHandOff.install(stream, on: channel) }.get()
        guard adopted == true else { return false }
        streams.add(stream, until: channel.closeFuture)
        return true
    }
}
