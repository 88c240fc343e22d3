import DDP
import DDPClient
import HTTPTypes
import Hummingbird
import NIOCore

extension BridgeRoutes {
    /// `GET /v1/public/publications`: what may be read without a session, with its parameters.
    @Sendable func publicPublications(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        Reply.json(["publications": fanout.publications.ejson])
    }

    /// `GET /v1/public/events?subscribe=<publication>&params=<JSON array>`: a public
    /// publication's changes as Server-Sent Events, without a session; the same filters,
    /// snapshot and `Last-Event-ID` resume as `GET /v1/events`.
    ///
    /// The opening's steps are the event loop's door's (``openPublicStream(_:_:on:)``), in the
    /// same order and by the same functions; the route then waits where the door would not (a
    /// subscription to place and make ready, a snapshot or a live query to read).
    @Sendable func publicEvents(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let query = try StreamQuery(request)
        let opening = try publicStreamOpening(query)
        let address = settings.clients.key(request, context)
        if let reader = readAtOnce(opening, from: address, on: context.channel.eventLoop) {
            return sseResponse(reader.stream, request, context, finally: reader.finally)
        }
        var start = opening.start
        try fanout.admitReader(from: address)
        let session: Session
        let id: String
        let before: UInt64
        let stream = makeStream(opening.filter, counters: registry.metrics.publicStreams, on: context.channel.eventLoop)
        do {
            (session, id, before) = try await fanout.subscribe(opening.name, opening.params, from: address)
        } catch {
            fanout.readerLeft(from: address)
            throw error
        }
        // As `GET /v1/events?subscribe=` does: a live stream starts from the connection's log as
        // it was before subscribing, so the reader that brought the subscription gets its
        // documents as `added` before any change to them.
        if start.isLive, opening.filter.selector == nil { start = .resume(after: before) }
        do {
            try await session.attach(stream, start: start)
        } catch {
            fanout.release(session, id)
            fanout.readerLeft(from: address)
            throw error
        }
        return sseResponse(stream, request, context, finally: readerEnds(stream, session, id, address))
    }

    /// `GET /v1/public/events` on its connection's event loop (``FrontDoor``): the route's steps
    /// (``publicEvents(_:_:)``) as far as they go without waiting, ``publicStreamOpening(_:)`` then
    /// ``readAtOnce(_:from:on:)``. A refusal is the route's, the same bytes; a reader that must wait
    /// (a subscription not ready, a snapshot, a live query, a reader limit) is left to the route,
    /// with nothing taken. Opening readers of a busy publication was the request path's hops (a
    /// task per connection, the router, the hand-off back to the loop): docs/PERFORMANCE.md.
    func openPublicStream(_ query: StreamQuery, _ head: HTTPRequest, on channel: any Channel) -> LoopOpening {
        let route = "/v1/public/events"
        let opening: PublicStreamOpening
        do { opening = try publicStreamOpening(query) } catch { return .refuse(ProbeAnswer(error), route: route) }
        let address = settings.clients.key(settings.clients.address(head.headerFields, peer: channel.remoteAddress))
        guard let reader = readAtOnce(opening, from: address, on: channel.eventLoop) else { return .route }
        return .stream(loopStream(reader.stream, on: channel, route: route, finally: reader.finally))
    }

    /// What a public stream request asks for, checked in the order both doors check it.
    struct PublicStreamOpening {
        let start: Session.StreamStart
        let name: String
        let params: [EJSON]
        let filter: StreamFilter
    }

    /// The first step of a public stream's opening, on both doors: where it starts (400), the
    /// publication (403) and its params (400), then the filter (400).
    func publicStreamOpening(_ query: StreamQuery) throws(BridgeError) -> PublicStreamOpening {
        let start = try query.start()
        let (name, params) = try publicSubscription(query)
        return PublicStreamOpening(start: start, name: name, params: params, filter: try query.filter())
    }

    /// The second step, on both doors: a reader that needs nothing waited for (the publication's
    /// subscription held and ready on a connection that is up, ``PublicFanout/readyReader(_:_:from:)``,
    /// and a start from the log, ``Session/attachFromLog(_:start:)``), counted, referenced and
    /// attached, with what ends it; `nil`, with nothing taken, otherwise.
    func readAtOnce(_ opening: PublicStreamOpening, from address: ClientKey, on loop: any EventLoop) -> (
        stream: EventStream, finally: @Sendable () -> Void
    )? {
        // A live query or a snapshot never attaches from the log: no reader's place taken for it.
        guard Session.mayAttachFromLog(opening.filter, start: opening.start),
            let (session, id) = fanout.readyReader(opening.name, opening.params, from: address)
        else { return nil }
        let stream = makeStream(opening.filter, counters: registry.metrics.publicStreams, on: loop)
        // Ready already: a live stream starts from now, as the route's does once its
        // subscription is ready (what it would replay is what happened while it waited).
        guard session.attachFromLog(stream, start: opening.start) else {
            fanout.release(session, id)
            fanout.readerLeft(from: address)
            return nil
        }
        return (stream, readerEnds(stream, session, id, address))
    }

    /// What ends a public reader, whichever door opened it: detached, its reference released,
    /// its place given back.
    private func readerEnds(_ stream: EventStream, _ session: Session, _ id: String, _ address: ClientKey) -> @Sendable () -> Void {
        let fanout = self.fanout
        return {
            session.detach(stream)
            fanout.release(session, id)
            fanout.readerLeft(from: address)
        }
    }

    /// `HEAD /v1/public/events`: what a `GET` would answer, checked the same way, with no reader
    /// counted and nothing subscribed.
    @Sendable func publicEventsHead(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        _ = try publicStreamOpening(try StreamQuery(request))
        return Self.sseHead
    }

    /// `GET /v1/public/collections/{name}?subscribe=…&params=…` (and `selector`, `sort`, `skip`,
    /// `limit`, `fields`): what a public publication holds in a collection, once. `ETag` is the
    /// body's digest; `If-None-Match` with it answers 304; `Cache-Control: public, max-age`.
    @Sendable func publicCollection(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let collectionName = try collectionName(context)
        let (name, params) = try publicSubscription(try StreamQuery(request))
        let query = try documentQuery(request)
        let address = settings.clients.key(request, context)
        let bytes = try await publicAnswer(query, on: collectionName, of: name, params, from: address)
        let tag = "\"" + SHA256Digest.hex(bytes: bytes).prefix(32) + "\""
        let headers = publicHeaders(tag)
        if Self.matches(tag, request.headers[values: .ifNoneMatch]) { return Response(status: .notModified, headers: headers) }
        return Reply.json(encoded: ByteBuffer(bytes: bytes), headers: headers)
    }

    /// A public publication's collection queried (REST and MCP): the read holds a reader's
    /// place of `address` while it runs, like a stream, and the publication's subscription is
    /// referenced meanwhile (it lingers for the next reader).
    func publicAnswer(_ query: DocumentQuery, on collectionName: String, of name: String, _ params: [EJSON], from address: ClientKey)
        async throws -> [UInt8]
    {
        try fanout.admitReader(from: address)
        defer { fanout.readerLeft(from: address) }
        let (session, id, _) = try await fanout.subscribe(name, params, from: address)
        // The reference goes when the read is done; the subscription lingers for the next reader.
        defer { fanout.release(session, id) }
        let collection = await session.client.collection(collectionName, indexing: query.fieldToIndex.map { [$0] } ?? [])
        let (documents, count) = try await query.run(
            on: collection, budget: QueryBudget(time: settings.queryTimeBudget, clock: runtime.clock))
        var absent: AbsentCollection?
        if collection == nil {
            // The names leave the actor as they are; they are sorted outside it, off its loop.
            let held = await session.client.withCache { Array($0.collections.keys) }.sorted()
            absent = AbsentCollection(name: collectionName, held: held, publication: name)
        }
        return Self.queryBody(documents, count: count, absent: absent)
    }

    /// `GET /v1/public/collections/{name}`'s headers, after its answer.
    private func publicHeaders(_ tag: String) -> HTTPFields {
        var headers: HTTPFields = [
            .eTag: tag,
            .cacheControl: settings.publicMaxAge > 0 ? "public, max-age=\(settings.publicMaxAge)" : "public, no-cache"
        ]
        // With CORS on, the answer's Access-Control headers depend on the Origin: a shared cache
        // must keep one copy per origin, or it serves one origin's CORS answer to another.
        if !settings.corsOrigins.isEmpty { headers[.vary] = "Origin" }
        return headers
    }

    /// `subscribe=` (required) and `params=` of a public route: the publication must be public
    /// (403) before its params are read, and they must be what it takes (400).
    func publicSubscription(_ query: StreamQuery) throws(BridgeError) -> (name: String, params: [EJSON]) {
        guard let name = query.subscribe else {
            throw .badRequest("subscribe=<publication> is required (GET /v1/public/publications lists them)")
        }
        try fanout.publications.check(name)
        let params = try query.subscription()?.params ?? []
        try fanout.publications.check(name, params)
        return (name, params)
    }

    /// Whether an `If-None-Match` header names the tag (or `*`); weak tags compare by their value.
    static func matches(_ tag: String, _ headers: [String]) -> Bool {
        for header in headers {
            for candidate in header.split(separator: ",") {
                let value = candidate.trimmingSpaces
                if value == "*" || value == tag || (value.hasPrefix("W/") && value.dropFirst(2) == tag) { return true }
            }
        }
        return false
    }
}
