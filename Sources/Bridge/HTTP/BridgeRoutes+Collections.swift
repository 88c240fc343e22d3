import DDP
import DDPClient
import Hummingbird
import NIOCore

extension BridgeRoutes {
    /// `GET /v1/collections`: the session's collections with their document counts.
    @Sendable func listCollections(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let session = try await session(request, context)
        let list = await session.client.withCache { cache in
            cache.collections.keys.sorted().map { name -> EJSON in ["name": .string(name), "count": .int(cache.collections[name]!.documents.count)] }
        }
        return Reply.json(.array(list), headers: Reply.cacheHeaders(session.staleness))
    }

    /// `GET /v1/collections/{name}?selector=&sort=&skip=&limit=&fields=`.
    @Sendable func queryCollection(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        let query = try documentQuery(request)
        let session = try await session(request, context)
        // A copy of the one collection (copy-on-write: O(1) now; the connection copies its
        // dictionary only if it changes while the query runs), with an index of the field a
        // condition of the selector names (built on first use, kept by the connection's changes).
        // The scan runs outside the actor.
        let collection = await session.client.collection(name, indexing: query.fieldToIndex.map { [$0] } ?? [])
        let (documents, count) = try await query.run(
            on: collection, budget: QueryBudget(time: configuration.queryTimeBudget, clock: configuration.clock))
        // An empty answer says whether it means anything: a collection the session holds no
        // document of (a typo, or nothing subscribed yet) is named as such.
        var absent: AbsentCollection?
        if collection == nil {
            // The names leave the actor as they are; they are sorted outside it, off its loop.
            let held = await session.client.withCache { Array($0.collections.keys) }.sorted()
            absent = AbsentCollection(name: name, held: held, publication: nil, subscriptions: session.subscriptions.map(\.name))
        }
        let staleness = session.staleness
        let bytes = Self.queryBody(documents, count: count, absent: absent, upstream: staleness)
        return Reply.json(encoded: ByteBuffer(bytes: bytes), headers: Reply.cacheHeaders(staleness))
    }

    /// `{"documents": [...], "count": n}`, written straight to bytes; for a collection not held,
    /// `"collectionHeld": false`, the collections that are and a hint follow; while the session's
    /// upstream is not connected, `"upstream"`: its state (the answer may be stale).
    static func queryBody(_ documents: [EJSONObject], count: Int, absent: AbsentCollection? = nil, upstream: String? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + documents.count * 128)
        EJSONWriter.appendLiteral("{\"documents\":[", to: &out)
        for (i, document) in documents.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            EJSONWriter.write(.object(document), into: &out)
        }
        EJSONWriter.appendLiteral("],\"count\":", to: &out)
        EJSONWriter.writeInteger(Int64(count), into: &out)
        if let absent {
            EJSONWriter.appendLiteral(",\"collectionHeld\":false,\"heldCollections\":", to: &out)
            EJSONWriter.write(.array(absent.held.map { .string($0) }), into: &out)
            EJSONWriter.appendLiteral(",\"hint\":", to: &out)
            EJSONWriter.write(.string(absent.hint), into: &out)
        }
        if let upstream {
            EJSONWriter.appendLiteral(",\"upstream\":", to: &out)
            EJSONWriter.write(.string(upstream), into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The query a collection read asks for (`selector`, `sort`, `skip`, `limit`, `fields`).
    func documentQuery(_ request: Request) throws -> DocumentQuery {
        try DocumentQuery(
            selector: RequestInput.query(request, "selector"), sort: RequestInput.query(request, "sort"), skip: RequestInput.query(request, "skip"),
            limit: RequestInput.query(request, "limit"), fields: RequestInput.query(request, "fields"),
            defaultLimit: configuration.defaultQueryLimit, maxLimit: configuration.maxQueryLimit)
    }

    /// `GET /v1/collections/{name}/{id}`: one document with its `_id`; 404 when the session does not hold it.
    @Sendable func getDocument(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        let id = try documentID(context)
        let session = try await session(request, context)
        guard let body = await session.encodedDocument(name, id.wire) else {
            throw BridgeError.notFound("No document '\(id.wire)' in '\(name)' for this session (is it published to it?)")
        }
        return Reply.json(encoded: body, headers: Reply.cacheHeaders(session.staleness))
    }

    /// `POST /v1/collections/{name}`: insert through `/{name}/insert`; a missing `_id` becomes a
    /// Meteor-style id, predictable from the call's `randomSeed`.
    @Sendable func insertDocument(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        guard let document = try await RequestInput.objectBody(request, limit: configuration.maxBodySize) else {
            throw BridgeError.badRequest("the body must be the document to insert, a JSON object")
        }
        if let id = document["_id"] {
            do { _ = try DocumentID(ejson: id) } catch { throw BridgeError.badRequest("invalid _id: \(error.reason)") }
        }
        let seed = MeteorRandom.randomSeed()
        let session = try await session(request, context)
        let result = try await collectionCall(session, name, "insert", [.object(document)], randomSeed: document["_id"] == nil ? seed : nil)
        let id: EJSON
        if let result, !result.isNull {
            id = result
        } else {
            var generator = AleaRandom(randomSeed: seed, stream: "/collection/\(name)")
            id = document["_id"] ?? .string(generator.id())
        }
        return Reply.json(["id": id], status: .created)
    }

    /// `PATCH /v1/collections/{name}/{id}`: a Mongo modifier, or plain fields meaning `$set`.
    @Sendable func updateDocument(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        let id = try documentID(context)
        guard let body = try await RequestInput.objectBody(request, limit: configuration.maxBodySize), !body.isEmpty else {
            throw BridgeError.badRequest("the body must be a modifier ({\"$set\": {...}}) or the fields to set")
        }
        guard !body.keys.contains("") else { throw BridgeError.badRequest("a field name must not be empty") }
        let operators = body.keys.filter { $0.hasPrefix("$") }
        guard operators.isEmpty || operators.count == body.count else {
            throw BridgeError.badRequest("the body must be either a modifier or plain fields, not both")
        }
        let modifier: EJSON = operators.isEmpty ? ["$set": .object(body)] : .object(body)
        let session = try await session(request, context)
        let result = try await collectionCall(session, name, "update", [["_id": id.ejson], modifier, [:]])
        let count = result?.intValue ?? 0
        guard count > 0 else { throw BridgeError.notFound("No document '\(id.wire)' in '\(name)'") }
        return Reply.json(["updated": .int(count)])
    }

    /// `DELETE /v1/collections/{name}/{id}`.
    @Sendable func removeDocument(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        let id = try documentID(context)
        let session = try await session(request, context)
        let result = try await collectionCall(session, name, "remove", [["_id": id.ejson]])
        let count = result?.intValue ?? 0
        guard count > 0 else { throw BridgeError.notFound("No document '\(id.wire)' in '\(name)'") }
        return Reply.json(["removed": .int(count)])
    }

    /// Calls `/{name}/{op}`, falling back to Meteor 3's `/{name}/{op}Async` when only that exists.
    private func collectionCall(_ session: Session, _ name: String, _ op: String, _ params: [EJSON], randomSeed: String? = nil) async throws -> EJSON?
    {
        try await session.waitUntilConnected(timeout: configuration.connectTimeout)
        let options = MethodOptions(randomSeed: randomSeed)
        let method = "/\(name)/\(op)"
        do {
            return try await session.client.call(method, params: params, options: options, timeout: configuration.requestTimeout)
        } catch let error as DDPError where error.isMethodNotFound(method) {
            return try await session.client.call(method + "Async", params: params, options: options, timeout: configuration.requestTimeout)
        }
    }

    func collectionName(_ context: BridgeRequestContext) throws -> String {
        let raw = try context.parameters.require("name")
        guard let name = raw.percentDecoded, !name.isEmpty else { throw BridgeError.badRequest("invalid collection name") }
        return name
    }

    /// The `{id}` path segment as Meteor's wire id (an ObjectId as 24 hex digits, `~` forms for numbers).
    private func documentID(_ context: BridgeRequestContext) throws -> DocumentID {
        let raw = try context.parameters.require("id")
        guard let text = raw.percentDecoded else { throw BridgeError.badRequest("invalid document id") }
        do { return try DocumentID(wire: text) } catch { throw BridgeError.badRequest("invalid document id: \(error.reason)") }
    }
}
