import DDP
import DDPClient
import Hummingbird
import NIOCore

extension BridgeRoutes {
    /// `GET /v1/collections`: the session's collections with their document counts.
    @Sendable func listCollections(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let session = try await session(request, context)
        return Reply.json(await collectionList(session), headers: Reply.cacheHeaders(session.staleness))
    }

    /// The session's collections with their document counts (REST and MCP).
    func collectionList(_ session: Session) async -> EJSON {
        let list = await session.client.withCache { cache in
            cache.collections.sorted { $0.key < $1.key }.map { name, collection -> EJSON in
                ["name": .string(name), "count": .int(collection.documents.count)]
            }
        }
        return .array(list)
    }

    /// `GET /v1/collections/{name}?selector=&sort=&skip=&limit=&fields=`.
    @Sendable func queryCollection(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        let query = try documentQuery(request)
        let session = try await session(request, context)
        let (bytes, staleness) = try await answer(query, on: name, of: session)
        return Reply.json(encoded: ByteBuffer(bytes: bytes), headers: Reply.cacheHeaders(staleness))
    }

    /// A query's answer, `{"documents", "count"}` as bytes, and the session's staleness when it
    /// ran (REST and MCP).
    func answer(_ query: DocumentQuery, on name: String, of session: Session) async throws -> (body: [UInt8], staleness: String?) {
        // A copy of the one collection (copy-on-write: O(1) now; the connection copies its
        // dictionary only if it changes while the query runs), with an index of the field a
        // condition of the selector names (built on first use, kept by the connection's changes).
        // The scan runs outside the actor.
        let collection = await session.client.collection(name, indexing: query.fieldToIndex.map { [$0] } ?? [])
        let (documents, count) = try await query.run(
            on: collection, budget: QueryBudget(time: settings.queryTimeBudget, clock: runtime.clock))
        // An empty answer says whether it means anything: a collection the session holds no
        // document of (a typo, or nothing subscribed yet) is named as such.
        var absent: AbsentCollection?
        if collection == nil {
            // The names leave the actor as they are; they are sorted outside it, off its loop.
            let held = await session.client.withCache { Array($0.collections.keys) }.sorted()
            absent = AbsentCollection(name: name, held: held, publication: nil, subscriptions: session.subscriptions.map(\.name))
        }
        let staleness = session.staleness
        return (Self.queryBody(documents, count: count, absent: absent, upstream: staleness), staleness)
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
            limits: settings.queryLimits)
    }

    /// `GET /v1/collections/{name}/{id}`: one document with its `_id`; 404 when the session does not hold it.
    @Sendable func getDocument(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        let id = try documentID(context)
        let session = try await session(request, context)
        return Reply.json(encoded: try await document(id, in: name, of: session), headers: Reply.cacheHeaders(session.staleness))
    }

    /// One document as its answer's bytes; 404 when the session does not hold it (REST and MCP).
    func document(_ id: DocumentID, in name: String, of session: Session) async throws(BridgeError) -> ByteBuffer {
        guard let body = await session.encodedDocument(name, id.wire) else {
            throw BridgeError.notFound("No document '\(id.wire)' in '\(name)' for this session (is it published to it?)")
        }
        return body
    }

    /// `POST /v1/collections/{name}`: insert through `/{name}/insert`; a missing `_id` becomes a
    /// Meteor-style id, predictable from the call's `randomSeed`.
    @Sendable func insertDocument(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        guard let document = try await RequestInput.objectBody(request, limit: settings.maxBodySize) else {
            throw BridgeError.badRequest("the body must be the document to insert, a JSON object")
        }
        if let id = document["_id"] {
            do { _ = try DocumentID(ejson: id) } catch { throw BridgeError.badRequest("invalid _id: \(error.reason)") }
        }
        let session = try await session(request, context)
        return Reply.json(["id": try await insert(document, into: name, of: session)], status: .created)
    }

    /// Inserts through `/{name}/insert`; the new document's id (REST and MCP).
    func insert(_ document: EJSONObject, into name: String, of session: Session) async throws -> EJSON {
        let seed = MeteorRandom.randomSeed()
        let result = try await collectionCall(session, name, "insert", [.object(document)], randomSeed: document["_id"] == nil ? seed : nil)
        if let result, !result.isNull { return result }
        var generator = AleaRandom(randomSeed: seed, stream: "/collection/\(name)")
        return document["_id"] ?? .string(generator.id())
    }

    /// `PATCH /v1/collections/{name}/{id}`: a Mongo modifier, or plain fields meaning `$set`.
    @Sendable func updateDocument(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        let id = try documentID(context)
        let modifier = try Self.modifier(try await RequestInput.objectBody(request, limit: settings.maxBodySize))
        let session = try await session(request, context)
        return Reply.json(["updated": .int(try await update(id, in: name, with: modifier, of: session))])
    }

    /// A modifier, or plain fields meaning `$set` (never both, no empty field name).
    static func modifier(_ body: EJSONObject?) throws(BridgeError) -> EJSON {
        guard let body, !body.isEmpty else {
            throw BridgeError.badRequest("the body must be a modifier ({\"$set\": {...}}) or the fields to set")
        }
        guard !body.keys.contains("") else { throw BridgeError.badRequest("a field name must not be empty") }
        let operators = body.keys.filter { $0.hasPrefix("$") }
        guard operators.isEmpty || operators.count == body.count else {
            throw BridgeError.badRequest("the body must be either a modifier or plain fields, not both")
        }
        return operators.isEmpty ? ["$set": .object(body)] : .object(body)
    }

    /// Updates one document through `/{name}/update`; 404 when none was (REST and MCP).
    func update(_ id: DocumentID, in name: String, with modifier: EJSON, of session: Session) async throws -> Int {
        let result = try await collectionCall(session, name, "update", [["_id": id.ejson], modifier, [:]])
        let count = result?.intValue ?? 0
        guard count > 0 else { throw BridgeError.notFound("No document '\(id.wire)' in '\(name)'") }
        return count
    }

    /// `DELETE /v1/collections/{name}/{id}`.
    @Sendable func removeDocument(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let name = try collectionName(context)
        let id = try documentID(context)
        let session = try await session(request, context)
        return Reply.json(["removed": .int(try await remove(id, from: name, of: session))])
    }

    /// Removes one document through `/{name}/remove`; 404 when none was (REST and MCP).
    func remove(_ id: DocumentID, from name: String, of session: Session) async throws -> Int {
        let result = try await collectionCall(session, name, "remove", [["_id": id.ejson]])
        let count = result?.intValue ?? 0
        guard count > 0 else { throw BridgeError.notFound("No document '\(id.wire)' in '\(name)'") }
        return count
    }

    /// Calls `/{name}/{op}`, falling back to Meteor 3's `/{name}/{op}Async` when only that exists.
    private func collectionCall(_ session: Session, _ name: String, _ op: String, _ params: [EJSON], randomSeed: String? = nil) async throws -> EJSON?
    {
        try await session.waitUntilConnected(timeout: settings.connectTimeout)
        let options = MethodOptions(randomSeed: randomSeed)
        let method = "/\(name)/\(op)"
        do {
            return try await session.client.call(method, params: params, options: options, timeout: settings.requestTimeout)
        } catch let error as DDPError where error.isMethodNotFound(method) {
            return try await session.client.call(method + "Async", params: params, options: options, timeout: settings.requestTimeout)
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
