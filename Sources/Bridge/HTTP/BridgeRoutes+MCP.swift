import DDP
import DDPClient
import HTTPTypes
import Hummingbird
import NIOCore
import Timing

/// `/mcp`: the Model Context Protocol's Streamable HTTP transport, as ordinary routes of the
/// router (the front door's classification of every other request, with its checks: admission,
/// hygiene, the origin gate for writes, the body limit). An agent is its user: each POST carries
/// the same credential REST takes (a bridge session token or a Meteor login token), and its
/// calls go through that user's session and upstream connection, as REST calls do. Without a
/// credential an agent gets the public part only. docs/MCP.md.
extension BridgeRoutes {
    static let mcpSessionHeader = HTTPField.Name("Mcp-Session-Id")!
    static let mcpVersionHeader = HTTPField.Name("MCP-Protocol-Version")!

    /// `POST /mcp`: one JSON-RPC message. A request is answered with one JSON object
    /// (`application/json`); a notification or a client's response with 202.
    @Sendable func mcpPost(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let body: EJSON?
        do {
            body = try await RequestInput.body(request, limit: settings.maxBodySize)
        } catch let error as BridgeError where error.code == .badRequest {
            return Self.mcpFault(MCPProtocol.Fault(code: MCPProtocol.Fault.parseError, message: error.reason), status: .badRequest)
        }
        let inbound: MCPProtocol.Inbound
        switch MCPProtocol.parse(body) {
        case .success(let message): inbound = message
        case .failure(let fault): return Self.mcpFault(fault, status: .badRequest)
        }
        let requestID: EJSON? = if case .request(let id, _, _) = inbound { id } else { nil }
        if let version = request.headers[Self.mcpVersionHeader], !MCPProtocol.versions.contains(version) {
            let spoken = MCPProtocol.versions.joined(separator: ", ")
            return Self.mcpFault(
                MCPProtocol.Fault(
                    code: MCPProtocol.Fault.invalidRequest, message: "MCP-Protocol-Version \(version) is not spoken here (\(spoken))", id: requestID),
                status: .badRequest)
        }
        let credential = RequestInput.credential(request)
        let owner = credential.map { SessionToken.hash($0.token) }
        if case .request(let id, "initialize", let params) = inbound {
            return try await mcpInitialize(id, params, owner: owner, request, context)
        }
        guard let sessionID = request.headers[Self.mcpSessionHeader], MCPProtocol.isValidSessionID(sessionID[...]) else {
            return Self.mcpFault(
                MCPProtocol.Fault(
                    code: MCPProtocol.Fault.invalidRequest, message: "Mcp-Session-Id is missing or not a session id: send initialize first",
                    id: requestID),
                status: .badRequest)
        }
        let entry: MCPSessions.Entry
        do {
            entry = try mcp.use(sessionID, owner: owner, now: runtime.clock.now)
        } catch {
            // Another credential's session is answered as an unknown one: it does not exist for it.
            return Self.mcpFault(
                MCPProtocol.Fault(
                    code: MCPProtocol.Fault.invalidRequest, message: "No MCP session \(sessionID) for this credential: send initialize again",
                    id: requestID), status: .notFound)
        }
        guard case .request(let id, let method, let params) = inbound else { return Response(status: .accepted) }
        do {
            let result = try await mcpAnswer(method, params, signedIn: credential != nil, entry: entry, request, context)
            return Self.mcpJSON(MCPProtocol.response(id: id, result: result))
        } catch var fault as MCPProtocol.Fault {
            fault.id = id
            return Self.mcpJSON(MCPProtocol.error(fault))
        } catch let error as BridgeError where error.status == .unauthorized {
            // The credential no longer stands (a lost login, an ended session): the MCP session
            // ends with it, with the reason REST gives.
            try? mcp.close(sessionID, owner: owner)
            throw error
        } catch {
            // Any other refusal (the upstream away, a limit, a query's budget) is the request's
            // JSON-RPC error, with the bridge's error as its data: the transport itself is fine.
            let refusal = BridgeError.from(error)
            let code = refusal.status == .badRequest ? MCPProtocol.Fault.invalidParams : MCPProtocol.Fault.internalError
            return Self.mcpJSON(MCPProtocol.error(MCPProtocol.Fault(code: code, message: refusal.reason, id: id, data: refusal.body)))
        }
    }

    /// `GET /mcp`: the session's server stream, where `notifications/resources/updated` comes for
    /// each subscribed resource a change reaches (``MCPWatch``). It is a stream of the agent's
    /// user's session (counted against its streams, cut past its buffer as a slow consumer, with
    /// its heartbeats), one per MCP session; signed out there is nothing to hear (405).
    @Sendable func mcpStream(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        var resumeAfter: UInt64?
        if let text = request.headers[StreamQuery.lastEventIDField] {
            guard let id = QueryString.eventID(text) else {
                throw BridgeError.badRequest("Last-Event-ID must be an id this MCP session's stream sent, got '\(text)'")
            }
            resumeAfter = id
        }
        let (entry, session) = try await mcpStreamOwner(request, context)
        var filter = StreamFilter()
        filter.watch = entry.watch
        let stream = makeStream(filter, counters: registry.metrics.sessionStreams, on: context.channel.eventLoop)
        // The MCP session's end (DELETE, a lost login, idleness) ends its stream too.
        let held = await session.client.withCache { cache in
            Dictionary(uniqueKeysWithValues: cache.collections.map { ($0.key, $0.value.documents.count) })
        }
        guard entry.watch.openStream(collections: held, ending: { stream.finish(with: SSEFrame.lastError(.sessionEnded, "The MCP session ended")) })
        else {
            throw BridgeError(.tooManyStreams, "This MCP session's server stream is open already (one per session)")
        }
        do {
            try await session.attach(stream, start: .live)
        } catch {
            entry.watch.streamClosed()
            throw error
        }
        let watch = entry.watch
        // Resumed: what changed since, from the session's log (read after the stream attached:
        // a change then may be notified twice, never missed), on the stream's loop.
        if let resumeAfter {
            let missed = session.changes(after: resumeAfter, maxBytes: .max)
            if let frames = watch.replay(missed?.events, through: missed?.cursor ?? session.logPosition()) {
                stream.loop.execute {
                    var wakeups = Wakeups()
                    stream.enqueue(frames, into: &wakeups)
                    wakeups.ring()
                }
            }
        }
        return sseResponse(stream, request, context) {
            session.detach(stream)
            watch.streamClosed()
        }
    }

    /// `HEAD /mcp`: what a `GET` would answer, checked the same way, with no stream opened (the
    /// router's generated HEAD would run the `GET` and leave its stream attached).
    @Sendable func mcpStreamHead(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        _ = try await mcpStreamOwner(request, context)
        return Self.sseHead
    }

    /// The MCP session a server stream is asked for, and its user's session.
    private func mcpStreamOwner(_ request: Request, _ context: BridgeRequestContext) async throws -> (MCPSessions.Entry, Session) {
        guard let sessionID = request.headers[Self.mcpSessionHeader], MCPProtocol.isValidSessionID(sessionID[...]) else {
            throw BridgeError.badRequest("Mcp-Session-Id is missing or not a session id: send initialize first")
        }
        guard let credential = RequestInput.credential(request) else {
            throw BridgeError(
                .methodNotAllowed, "Signed out, an MCP session has no server stream (nothing it can subscribe to)",
                allow: [.post, .delete])
        }
        let entry: MCPSessions.Entry
        do {
            entry = try mcp.use(sessionID, owner: SessionToken.hash(credential.token), now: runtime.clock.now)
        } catch {
            throw BridgeError.notFound("No MCP session \(sessionID) for this credential: send initialize again")
        }
        return (entry, try await session(request, context))
    }

    /// `DELETE /mcp`: ends the session named by `Mcp-Session-Id` (204).
    @Sendable func mcpDelete(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        guard let sessionID = request.headers[Self.mcpSessionHeader], MCPProtocol.isValidSessionID(sessionID[...]) else {
            throw BridgeError.badRequest("Mcp-Session-Id is missing or not a session id: it names the MCP session to end")
        }
        let owner = RequestInput.credential(request).map { SessionToken.hash($0.token) }
        do { try mcp.close(sessionID, owner: owner) } catch { throw BridgeError.notFound("No MCP session \(sessionID) for this credential") }
        return Response(status: .noContent)
    }

    /// `initialize`: a new MCP session, for the credential the request carries (checked now: the
    /// agent is its user from its first call), with the version both speak.
    private func mcpInitialize(
        _ id: EJSON, _ params: EJSONObject, owner: String?, _ request: Request, _ context: BridgeRequestContext
    ) async throws -> Response {
        if owner != nil { _ = try await session(request, context) }
        let version = MCPProtocol.negotiate(params["protocolVersion"]?.stringValue)
        let address = settings.clients.key(request, context)
        let sessionID: String
        do {
            sessionID = try mcp.open(owner: owner, address: address, version: version, now: runtime.clock.now)
        } catch MCPSessions.Refusal.tooMany(let perAddress) {
            throw perAddress
                ? BridgeError(
                    .tooManySessionsFromAddress, "This address holds its most MCP sessions (--max-sessions-per-address); end one with DELETE /mcp",
                    retryAfter: 5)
                : BridgeError(
                    .tooManySessions, "The bridge holds its most MCP sessions (--mcp-max-sessions, a quarter of them signed out)", retryAfter: 5)
        } catch let error as BridgeError {
            throw error
        } catch {
            throw BridgeError(.tooManySessions, "The MCP session could not be opened")
        }
        let result: EJSON = [
            "protocolVersion": .string(version),
            "capabilities": ["tools": ["listChanged": false], "resources": ["subscribe": .bool(owner != nil), "listChanged": .bool(owner != nil)]],
            "serverInfo": ["name": "ddp-bridge", "title": "Meteor data through ddp-bridge", "version": .string(BuildInfo.version)],
            "instructions": .string(
                owner == nil
                    ? "Signed out: only the public publications. Send Authorization: Bearer with a Meteor login token to act as that user."
                    : "You act as the user of your credential: Meteor's permissions for that user apply. Subscribe to a publication, then query its collections."
            )
        ]
        var response = Self.mcpJSON(MCPProtocol.response(id: id, result: result))
        response.headers[Self.mcpSessionHeader] = sessionID
        return response
    }

    /// A request's result, or a JSON-RPC error (``MCPProtocol/Fault``).
    private func mcpAnswer(
        _ method: String, _ params: EJSONObject, signedIn: Bool, entry: MCPSessions.Entry, _ request: Request,
        _ context: BridgeRequestContext
    )
        async throws -> EJSON
    {
        switch method {
        case "ping": return [:]
        case "tools/list": return settings.mcpTools.list(signedIn: signedIn)
        case "tools/call":
            guard let name = params["name"]?.stringValue else { throw MCPProtocol.Fault.invalidParams("tools/call needs the tool's \"name\"") }
            let arguments: EJSONObject
            switch params["arguments"] {
            case nil, .null?: arguments = [:]
            case .object(let o)?: arguments = o
            case let other?: throw MCPProtocol.Fault.invalidParams("\"arguments\" must be an object, not \(other.typeName)")
            }
            guard let tool = settings.mcpTools.tool(named: name, signedIn: signedIn) else {
                throw MCPProtocol.Fault.invalidParams(
                    signedIn ? "Unknown tool: \(name)" : "Unknown tool: \(name) (signed out, only the public tools are offered)")
            }
            return try await mcpCall(tool, arguments, request, context)
        case "resources/templates/list":
            return [
                "resourceTemplates": [
                    [
                        "uriTemplate": "ddp://{collection}/{id}", "name": "document", "mimeType": "application/json",
                        "description": "One document of a collection this session holds"
                    ],
                    [
                        "uriTemplate": "ddp://{collection}{?selector,sort,skip,limit,fields}", "name": "query", "mimeType": "application/json",
                        "description": "A collection's documents matching a query (the REST query's parameters): {documents, count}"
                    ]
                ]
            ]
        case "resources/list":
            guard signedIn else { return ["resources": []] }
            let session = try await session(request, context)
            guard case .array(let collections) = await collectionList(session) else { return ["resources": []] }
            let resources: [EJSON] = collections.compactMap { entry in
                guard let name = entry["name"]?.stringValue else { return nil }
                return [
                    "uri": .string(MCPResource.uri(collection: name)), "name": .string(name), "mimeType": "application/json",
                    "description": .string("The \(name) collection (\(entry["count"]?.intValue ?? 0) documents)")
                ]
            }
            return ["resources": .array(resources)]
        case "resources/read":
            guard let uri = params["uri"]?.stringValue else { throw MCPProtocol.Fault.invalidParams("resources/read needs a \"uri\"") }
            guard let resource = MCPResource(uri: uri) else {
                throw MCPProtocol.Fault.invalidParams("\(uri) is not a resource of this server (ddp://{collection}/{id} or ddp://{collection}?…)")
            }
            guard signedIn else {
                throw MCPProtocol.Fault(code: MCPResource.notFound, message: "Resource not found (signed out)", data: ["uri": .string(uri)])
            }
            let session = try await session(request, context)
            let bytes: [UInt8]
            do {
                switch resource {
                case .document(let collection, let id):
                    bytes = Array((try await document(id, in: collection, of: session)).readableBytesView)
                case .query(let collection, let query):
                    let documentQuery = try DocumentQuery(
                        selector: query["selector"], sort: query["sort"], skip: query["skip"], limit: query["limit"], fields: query["fields"],
                        limits: settings.queryLimits)
                    bytes = try await answer(documentQuery, on: collection, of: session).body
                }
            } catch let error as BridgeError where error.status == .notFound {
                throw MCPProtocol.Fault(code: MCPResource.notFound, message: error.reason, data: ["uri": .string(uri)])
            } catch let error as BridgeError where error.status == .badRequest {
                throw MCPProtocol.Fault.invalidParams(error.reason)
            }
            return ["contents": [["uri": .string(uri), "mimeType": "application/json", "text": .string(String(decoding: bytes, as: UTF8.self))]]]
        case "resources/subscribe", "resources/unsubscribe":
            guard let uri = params["uri"]?.stringValue, let resource = MCPResource(uri: uri) else {
                throw MCPProtocol.Fault.invalidParams("\(method) needs a \"uri\" of this server (ddp://{collection}/{id} or ddp://{collection}?…)")
            }
            guard signedIn else { throw MCPProtocol.Fault.invalidParams("Signed out, no resource can be subscribed to") }
            if method == "resources/unsubscribe" {
                mcp.unwatch(uri, for: entry)
            } else if !(try mcp.watch(uri, resource, for: entry)) {
                throw MCPProtocol.Fault.invalidParams("This session watches its most resources (\(MCPWatch.limit)); unsubscribe from one first")
            }
            return [:]
        default:
            throw MCPProtocol.Fault(code: MCPProtocol.Fault.methodNotFound, message: "Method not found: \(method)")
        }
    }

    /// A tool's call: its answer as a tool result (`structuredContent`, and the same JSON as
    /// text), or a refusal as a tool error carrying the bridge's error (`error`, `reason`).
    private func mcpCall(_ tool: MCPToolCatalog.Tool, _ arguments: EJSONObject, _ request: Request, _ context: BridgeRequestContext)
        async throws -> EJSON
    {
        do {
            return MCPToolResult.success(try await mcpRun(tool, MCPArguments(arguments), request, context))
        } catch let error as MCPProtocol.Fault {
            throw error
        } catch {
            let bridgeError = BridgeError.from(error)
            // Without a standing credential nothing else can be answered: the caller ends the session.
            if bridgeError.status == .unauthorized { throw bridgeError }
            return MCPToolResult.failure(bridgeError)
        }
    }

    private func mcpRun(_ tool: MCPToolCatalog.Tool, _ arguments: MCPArguments, _ request: Request, _ context: BridgeRequestContext)
        async throws -> EJSON
    {
        let address = settings.clients.key(request, context)
        switch tool {
        case .builtin(.listPublicPublications):
            return ["publications": fanout.publications.ejson]
        case .builtin(.queryPublic):
            let name = try arguments.string("publication")
            try fanout.publications.check(name)
            let params = try arguments.array("params").arrayValue ?? []
            try fanout.publications.check(name, params)
            let query = try arguments.documentQuery(settings.queryLimits)
            return try MCPToolResult.decoded(
                try await publicAnswer(query, on: try arguments.string("collection"), of: name, params, from: address))
        default:
            break
        }
        let session = try await session(request, context)
        switch tool {
        case .builtin(.listPublicPublications), .builtin(.queryPublic):
            throw BridgeError(.internalError, "a public tool reached the session's")
        case .builtin(.changesSince):
            var cursor: UInt64?
            if let value = arguments.values["cursor"], !value.isNull {
                guard let n = value.intValue, let id = UInt64(exactly: n) else {
                    throw BridgeError.badRequest("cursor must be a non-negative integer (a cursor changes_since answered)")
                }
                cursor = id
            }
            guard let (events, next, more) = session.changes(after: cursor, maxBytes: Self.changesPage) else {
                return [
                    "reset": true, "cursor": .int(Int(session.logPosition())),
                    "reason": "The cursor is older than this session's event log (or not this session's): query again, then go on from this cursor"
                ]
            }
            let changes: [EJSON] = events.compactMap { event in
                guard let (kind, data) = SSEFrame.parts(of: event.frame) else { return nil }
                return ["id": .int(Int(event.id)), "event": .string(kind), "data": (try? EJSONParser.parse(data)) ?? .null]
            }
            return ["changes": .array(changes), "cursor": .int(Int(next)), "more": .bool(more)]
        case .builtin(.listCollections):
            return ["collections": await collectionList(session)]
        case .builtin(.query):
            let query = try arguments.documentQuery(settings.queryLimits)
            return try MCPToolResult.decoded(try await answer(query, on: try arguments.string("collection"), of: session).body)
        case .builtin(.getDocument):
            let body = try await document(try arguments.documentID("id"), in: try arguments.string("collection"), of: session)
            return try MCPToolResult.decoded(Array(body.readableBytesView))
        case .builtin(.subscribe):
            let item = try parseSubscription(["name": .string(try arguments.string("name")), "params": try arguments.array("params")])
            try await session.waitUntilConnected(timeout: settings.connectTimeout)
            let info = try await session.subscribe(item.name, params: item.params, wait: true, timeout: item.timeout)
            await registry.save(session)
            return info.ejson
        case .builtin(.unsubscribe):
            let id = try arguments.string("id")
            guard session.unsubscribe(id) else { throw BridgeError.notFound("No subscription '\(id)' in this session") }
            await registry.save(session)
            return ["unsubscribed": .string(id)]
        case .builtin(.insert):
            guard case .object(let document) = try arguments.required("document") else {
                throw BridgeError.badRequest("document must be an object: the document to insert")
            }
            if let id = document["_id"] {
                do { _ = try DocumentID(ejson: id) } catch { throw BridgeError.badRequest("invalid _id: \(error.reason)") }
            }
            return ["id": try await insert(document, into: try arguments.string("collection"), of: session)]
        case .builtin(.update):
            let modifier = try Self.modifier(try arguments.required("modifier").objectValue)
            let count = try await update(try arguments.documentID("id"), in: try arguments.string("collection"), with: modifier, of: session)
            return ["updated": .int(count)]
        case .builtin(.remove):
            return ["removed": .int(try await remove(try arguments.documentID("id"), from: try arguments.string("collection"), of: session))]
        case .builtin(.callMethod):
            let result = try await invoke(
                try arguments.string("name"), try arguments.array("params").arrayValue ?? [], on: session, timeout: settings.requestTimeout,
                from: address)
            return ["result": result ?? .null]
        case .method(let method):
            let result = try await invoke(
                method.method, MCPToolCatalog.params(method, arguments.values), on: session, timeout: settings.requestTimeout, from: address)
            return ["result": result ?? .null]
        }
    }

    /// The most bytes of the log's frames one `changes_since` answers (it says `more`).
    static let changesPage = 256 << 10

    private static func mcpJSON(_ bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Reply.json(encoded: ByteBuffer(bytes: bytes), status: status)
    }

    /// A JSON-RPC error as an HTTP answer (the transport's 400 and 404 carry one).
    private static func mcpFault(_ fault: MCPProtocol.Fault, status: HTTPResponse.Status) -> Response {
        mcpJSON(MCPProtocol.error(fault), status: status)
    }
}
