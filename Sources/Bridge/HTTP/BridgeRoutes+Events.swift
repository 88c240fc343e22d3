import DDP
import DDPClient
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension BridgeRoutes {
    /// `GET /v1/events`: the session's live changes as Server-Sent Events.
    ///
    /// Query: `collections` (comma-separated), `id` (one document; one collection), `selector`
    /// (a live query; one collection), `snapshot=true`, `subscribe` + `params` (a subscription the
    /// stream holds while it is open), `lastEventId` (or the `Last-Event-ID` header).
    @Sendable func events(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let filter = try Self.streamFilter(request)
        var start = try Self.streamStart(request)
        let owned = try Self.streamSubscription(request)
        let session = try await session(request, context)
        var subscription: SubscriptionInfo?
        if let owned {
            try await session.waitUntilConnected(timeout: configuration.connectTimeout)
            // A live stream attaches once its subscription is ready, and so starts from the log as
            // it was before subscribing: the subscription's documents and every change made while
            // it got ready reach the stream (they were lost, and `curl -N` of a publication showed
            // nothing until its next change), written at the consumer's pace; a load larger than the
            // log gives a reset and a snapshot. A live query cannot replay and starts as it did.
            if start.isLive, filter.selector == nil { start = .resume(after: session.logPosition()) }
            subscription = try await session.subscribe(
                owned.name, params: owned.params, wait: true, timeout: configuration.requestTimeout, transient: true)
        }
        let ownedID = subscription?.id
        let stream = makeStream(filter, counters: registry.metrics.sessionStreams)
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

    /// `GET /v1/events` opened on its connection's event loop, without the request path
    /// (``ProbeFastPath``), when nothing needs waiting for: a session token this bridge holds
    /// (``SessionRegistry/heldSession(token:)``), no `subscribe=`, and a start from the log
    /// (``Session/attachFromLog(_:start:)``). Attached and detached as ``events(_:_:)`` does.
    /// `nil`, with nothing taken, for anything else: the router answers those as always.
    func openSessionStream(_ request: Request, on channel: any Channel) -> LoopStream? {
        guard RequestInput.query(request, "subscribe") == nil, RequestInput.query(request, "params") == nil,
            let filter = try? Self.streamFilter(request), let start = try? Self.streamStart(request),
            let credential = RequestInput.credential(request), SessionToken.isSessionToken(credential.token),
            let session = registry.heldSession(token: credential.token)
        else { return nil }
        let stream = makeStream(filter, counters: registry.metrics.sessionStreams)
        guard session.attachFromLog(stream, start: start) else { return nil }
        session.touch()
        return loopStream(stream, on: channel, route: "/v1/events") { session.detach(stream) }
    }

    /// A stream with the bridge's buffer limit, stall timeout and clock.
    func makeStream(_ filter: StreamFilter, counters: StreamCounters) -> EventStream {
        EventStream(
            filter: filter, limit: configuration.streamBufferLimit, stallTimeout: configuration.streamStallTimeout,
            clock: configuration.clock, counters: counters)
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
            body: ByteBuffer(bytes: SSEFrame.retry(milliseconds: configuration.streamRetryMilliseconds)), route: route)
    }

    /// A stream request on the loop (``ProbeFastPath``): the public or the session stream, when
    /// it needs nothing waited for; `nil` (nothing taken) for every other request.
    @Sendable func openStreamOnLoop(_ head: HTTPRequest, on channel: any Channel) -> LoopStream? {
        guard let path = head.path, path.utf8.count <= RequestHygieneMiddleware.maximumTargetBytes else { return nil }
        let isPublic = path.hasPrefix("/v1/public/events?")
        guard isPublic || path == "/v1/events" || path.hasPrefix("/v1/events?") else { return nil }
        let request = Request(head: head, body: RequestBody(buffer: ByteBuffer()))
        if let query = request.uri.query, QueryString.firstUndecodableParameter(query) != nil { return nil }
        return isPublic ? openPublicStream(request, on: channel) : openSessionStream(request, on: channel)
    }

    /// `HEAD /v1/events`: what a `GET` would answer, checked the same way, with no stream opened
    /// and nothing subscribed (the generated HEAD route would run the `GET` and drop its body,
    /// leaving the stream attached for good).
    @Sendable func eventsHead(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        _ = try Self.streamFilter(request)
        _ = try Self.streamStart(request)
        _ = try Self.streamSubscription(request)
        _ = try await session(request, context)
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
        // A `HEAD` (answered as a `GET` by the router) has its body dropped by the HTTP encoder:
        // only a `GET`'s writer frames its chunks itself (``StreamHandOff``).
        let framing: StreamHandOff.Framing = request.method == .get ? .ownChunks : .encoder
        let retry = configuration.streamRetryMilliseconds
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
                if await Self.handOff(stream, on: channel, framing: framing, streams: streams) { return }
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
    static func handOff(_ stream: EventStream, on channel: any Channel, framing: StreamHandOff.Framing, streams: LiveStreams) async -> Bool {
        let adopted = try? await channel.eventLoop.submit { StreamAnchor.install(stream, on: channel, framing: framing) }.get()
        guard adopted == true else { return false }
        streams.add(stream, until: channel.closeFuture)
        return true
    }

    /// `subscribe=<publication>&params=<JSON array>`, if given.
    static func streamSubscription(_ request: Request) throws -> (name: String, params: [EJSON])? {
        guard let name = RequestInput.query(request, "subscribe"), !name.isEmpty else {
            if RequestInput.query(request, "params") != nil { throw BridgeError.badRequest("params needs subscribe=publication") }
            return nil
        }
        var params: [EJSON] = []
        if let text = RequestInput.query(request, "params"), !text.isEmpty {
            guard case .array(let list) = try DocumentQuery.json(text, "params") else { throw BridgeError.badRequest("params must be a JSON array") }
            params = list
        }
        return (name, params)
    }

    static func streamFilter(_ request: Request) throws(BridgeError) -> StreamFilter {
        var filter = StreamFilter()
        if let text = RequestInput.query(request, "collections"), !text.isEmpty {
            filter.collections = Set(text.split(separator: ",").map { String(RequestInput.trimmed($0)) }.filter { !$0.isEmpty })
        }
        let single = filter.collections?.count == 1
        if let id = RequestInput.query(request, "id"), !id.isEmpty {
            guard single else { throw .badRequest("id needs exactly one collection in collections=") }
            do { filter.documentID = try DocumentID(wire: id).wire } catch { throw .badRequest("invalid id: \(error.reason)") }
        }
        if let text = RequestInput.query(request, "selector"), !text.isEmpty {
            guard single else { throw .badRequest("selector needs exactly one collection in collections=") }
            do { filter.selector = try Selector(try DocumentQuery.json(text, "selector")) } catch let error as SelectorError {
                throw .badRequest("invalid selector: \(error.reason)")
            } catch { throw BridgeError.from(error) }
        }
        return filter
    }

    static func streamStart(_ request: Request) throws(BridgeError) -> Session.StreamStart {
        let header = request.headers[.init("Last-Event-ID")!]
        if let text = header ?? RequestInput.query(request, "lastEventId"), !text.isEmpty {
            guard let id = QueryString.eventID(text) else {
                throw .badRequest("Last-Event-ID must be an event id from this session, got '\(text)'")
            }
            return .resume(after: id)
        }
        return try RequestInput.flag(request, "snapshot") == true ? .snapshot : .live
    }
}
