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
    @Sendable func publicEvents(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let (name, params) = try Self.publicSubscription(request)
        let filter = try Self.streamFilter(request)
        var start = try Self.streamStart(request)
        let address = RequestInput.clientKey(request, context, configuration: configuration)
        try fanout.admitReader(from: address)
        let session: Session
        let id: String
        let before: UInt64
        let stream = makeStream(filter, counters: registry.metrics.publicStreams)
        do {
            (session, id, before) = try await fanout.subscribe(name, params, from: address)
        } catch {
            fanout.readerLeft(from: address)
            throw error
        }
        // As `GET /v1/events?subscribe=` does: a live stream starts from the connection's log as
        // it was before subscribing, so the reader that brought the subscription gets its
        // documents as `added` before any change to them (it got changes alone before).
        if start.isLive, filter.selector == nil { start = .resume(after: before) }
        do {
            try await session.attach(stream, start: start)
        } catch {
            fanout.release(session, id)
            fanout.readerLeft(from: address)
            throw error
        }
        let fanout = self.fanout
        return sseResponse(stream, request, context) {
            session.detach(stream)
            fanout.release(session, id)
            fanout.readerLeft(from: address)
        }
    }

    /// `GET /v1/public/events` opened on its connection's event loop, without the request path
    /// (``ProbeFastPath``), when nothing needs waiting for: the publication's subscription is held
    /// and ready on a connection that is up (``PublicFanout/readyReader(_:_:from:)``) and the
    /// stream starts from the log (``Session/attachFromLog(_:start:)``). The stream is counted,
    /// referenced and attached as ``publicEvents(_:_:)`` does, and released when its connection
    /// closes. `nil`, with nothing taken, for anything else (another path, a request the router
    /// would refuse, a subscription not ready yet, a snapshot or a live query): the router
    /// answers those as always. Opening readers of a busy publication was the request path's hops
    /// (a task per connection, the router, the hand-off back to the loop): docs/PERFORMANCE.md.
    func openPublicStream(_ request: Request, on channel: any Channel) -> LoopStream? {
        guard let subscription = try? Self.publicSubscription(request), let filter = try? Self.streamFilter(request),
            let start = try? Self.streamStart(request)
        else { return nil }
        let address = configuration.clientKey(RequestInput.clientAddress(request, peer: channel.remoteAddress, configuration: configuration))
        guard let (session, id) = fanout.readyReader(subscription.name, subscription.params, from: address) else { return nil }
        let stream = makeStream(filter, counters: registry.metrics.publicStreams)
        // Ready already: a live stream starts from now, as the request path's does once its
        // subscription is ready (what it would replay is what happened while it waited).
        guard session.attachFromLog(stream, start: start) else {
            fanout.release(session, id)
            fanout.readerLeft(from: address)
            return nil
        }
        let fanout = self.fanout
        return loopStream(stream, on: channel, route: "/v1/public/events") {
            session.detach(stream)
            fanout.release(session, id)
            fanout.readerLeft(from: address)
        }
    }

    /// `HEAD /v1/public/events`: what a `GET` would answer, checked the same way, with no reader
    /// counted and nothing subscribed.
    @Sendable func publicEventsHead(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let (name, params) = try Self.publicSubscription(request)
        _ = try Self.streamFilter(request)
        _ = try Self.streamStart(request)
        try fanout.publications.check(name, params)
        return Self.sseHead
    }

    /// `GET /v1/public/collections/{name}?subscribe=…&params=…` (and `selector`, `sort`, `skip`,
    /// `limit`, `fields`): what a public publication holds in a collection, once. `ETag` is the
    /// body's digest; `If-None-Match` with it answers 304; `Cache-Control: public, max-age`.
    @Sendable func publicCollection(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let collectionName = try collectionName(context)
        let (name, params) = try Self.publicSubscription(request)
        let query = try documentQuery(request)
        // A read holds a reader's place while it runs, like a stream.
        let address = RequestInput.clientKey(request, context, configuration: configuration)
        try fanout.admitReader(from: address)
        defer { fanout.readerLeft(from: address) }
        let (session, id, _) = try await fanout.subscribe(name, params, from: address)
        // The reference goes when the read is done; the subscription lingers for the next reader.
        defer { fanout.release(session, id) }
        let collection = await session.client.collection(collectionName, indexing: query.fieldToIndex.map { [$0] } ?? [])
        let (documents, count) = try await query.run(
            on: collection, budget: QueryBudget(time: configuration.queryTimeBudget, clock: configuration.clock))
        var absent: AbsentCollection?
        if collection == nil {
            // The names leave the actor as they are; they are sorted outside it, off its loop.
            let held = await session.client.withCache { Array($0.collections.keys) }.sorted()
            absent = AbsentCollection(name: collectionName, held: held, publication: name)
        }
        let bytes = Self.queryBody(documents, count: count, absent: absent)
        let tag = "\"" + SHA256Digest.hex(bytes: bytes).prefix(32) + "\""
        var headers: HTTPFields = [
            .eTag: tag,
            .cacheControl: configuration.publicMaxAge > 0 ? "public, max-age=\(configuration.publicMaxAge)" : "public, no-cache"
        ]
        // With CORS on, the answer's Access-Control headers depend on the Origin: a shared cache
        // must keep one copy per origin, or it serves one origin's CORS answer to another.
        if !configuration.corsOrigins.isEmpty { headers[.vary] = "Origin" }
        if Self.matches(tag, request.headers[values: .ifNoneMatch]) { return Response(status: .notModified, headers: headers) }
        return Reply.json(encoded: ByteBuffer(bytes: bytes), headers: headers)
    }

    /// `subscribe=` (required) and `params=` of a public route.
    static func publicSubscription(_ request: Request) throws -> (name: String, params: [EJSON]) {
        guard let subscription = try streamSubscription(request) else {
            throw BridgeError.badRequest("subscribe=<publication> is required (GET /v1/public/publications lists them)")
        }
        return subscription
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
