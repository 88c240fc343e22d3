import Bridge
import DDP
import DDPServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

/// `/mcp` over real HTTP, against a running bridge and the in-process DDP server: an agent is
/// its user, its session is its credential's, and the transport's rules hold.
@Suite struct MCPRoutesTests {
    /// An MCP client over the harness: one session, the credential on every POST.
    struct Agent {
        let h: BridgeHarness
        let token: String?
        var sessionID: String?
        var next = 1

        init(_ h: BridgeHarness, token: String?) {
            self.h = h
            self.token = token
        }

        var headers: HTTPFields {
            var fields: HTTPFields = [.accept: "application/json, text/event-stream"]
            if let sessionID { fields[BridgeRoutesHeaders.session] = sessionID }
            return fields
        }

        mutating func initialize(version: String = "2025-06-18") async throws -> BridgeHarness.Reply {
            let reply = try await post(
                #"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"\#(version)","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#
            )
            sessionID = reply.headers[BridgeRoutesHeaders.session]
            return reply
        }

        func post(_ body: String, headers extra: HTTPFields = [:]) async throws -> BridgeHarness.Reply {
            var fields = headers
            for field in extra { fields[field.name] = field.value }
            return try await h.request(.post, "/mcp", token: token, body: body, headers: fields)
        }

        /// A request's `result` (or its `error`, as the reply says).
        mutating func call(_ method: String, _ params: EJSON = [:]) async throws -> EJSON {
            next += 1
            let body = EJSONWriter.encode(["jsonrpc": "2.0", "id": .int(next), "method": .string(method), "params": params])
            let reply = try await post(String(decoding: body, as: UTF8.self))
            #expect(reply.status == .ok, "\(method): \(reply.status) \(reply.text)")
            #expect(reply["id"] == .int(next))
            return reply["result"] ?? reply["error"].map { ["error": $0] } ?? .null
        }

        mutating func tool(_ name: String, _ arguments: EJSON = [:]) async throws -> EJSON {
            try await call("tools/call", ["name": .string(name), "arguments": arguments])
        }
    }

    /// Alice's agent, initialized and subscribed to her tasks, and another session of hers (the
    /// writer) subscribed to them too.
    static func alicesAgent(_ h: BridgeHarness) async throws -> (alice: String, writer: String, agent: Agent) {
        let (alice, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
        let (writer, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
        _ = try await h.request(.post, "/v1/subscriptions", token: writer, body: #"{"name":"myTasks"}"#)
        var agent = Agent(h, token: alice)
        _ = try await agent.initialize()
        _ = try await agent.tool("subscribe", ["name": "myTasks"])
        return (alice, writer, agent)
    }

    enum BridgeRoutesHeaders {
        static let session = HTTPField.Name("Mcp-Session-Id")!
        static let version = HTTPField.Name("MCP-Protocol-Version")!
    }

    @Test func anAgentIsItsUserQueriesCallsAndSeesOnlyWhatItsUserSees() async throws {
        try await BridgeHarness.run(configure: { $0.mcpTools = (try? MCPToolCatalog.parse(DemoDataSet.mcpTools)) ?? MCPToolCatalog() }) { h in
            let (alice, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            let (bob, _) = try await h.session(#"{"username":"bob","password":"hunter2"}"#)
            var agent = Agent(h, token: alice)
            let initialized = try await agent.initialize()
            #expect(initialized.status == .ok, "\(initialized.text)")
            #expect(initialized["result"]?["protocolVersion"] == "2025-06-18")
            #expect(agent.sessionID != nil, "no Mcp-Session-Id")
            #expect(try await agent.post(#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).status == .accepted)

            let tools = try await agent.call("tools/list")["tools"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
            #expect(Set(tools).isSuperset(of: ["query", "get_document", "subscribe", "echo", "whoami"]), "\(tools)")
            #expect(!tools.contains("call_method"), "call_method offered though the file does not allow it")

            let subscribed = try await agent.tool("subscribe", ["name": "myTasks"])
            #expect(subscribed["isError"] == false, "\(subscribed)")
            let queried = try await agent.tool("query", ["collection": "tasks", "sort": ["_id": .int(1)], "fields": ["text": .int(1)]])
            let ids = queried["structuredContent"]?["documents"]?.arrayValue?.compactMap { $0["_id"]?.stringValue }
            #expect(ids == ["task-a1", "task-a2"], "\(queried)")
            #expect(queried["structuredContent"]?["count"] == .int(2))
            #expect(queried["content"]?.arrayValue?.first?["type"] == "text")

            let echoed = try await agent.tool("echo", ["text": "hello"])
            #expect(echoed["structuredContent"]?["result"] == ["hello"], "\(echoed)")
            let me = try await agent.tool("whoami")
            #expect(me["structuredContent"]?["result"]?.stringValue?.isEmpty == false, "\(me)")

            // Bob's agent, subscribed to the same publication, sees only bob's: alice's task is
            // not his to read, and the refusal is a tool error with the bridge's error.
            var bobs = Agent(h, token: bob)
            _ = try await bobs.initialize()
            _ = try await bobs.tool("subscribe", ["name": "myTasks"])
            let refused = try await bobs.tool("get_document", ["collection": "tasks", "id": "task-a1"])
            #expect(refused["isError"] == true, "\(refused)")
            #expect(refused["structuredContent"]?["error"] == "not-found", "\(refused)")
            let own = try await bobs.tool("get_document", ["collection": "tasks", "id": "task-b1"])
            #expect(own["structuredContent"]?["_id"] == "task-b1", "\(own)")

            // Resources: the templates, and one document read as alice.
            let templates = try await agent.call("resources/templates/list")["resourceTemplates"]?.arrayValue?.compactMap {
                $0["uriTemplate"]?.stringValue
            }
            #expect(templates?.contains("ddp://{collection}/{id}") == true)
            let read = try await agent.call("resources/read", ["uri": "ddp://tasks/task-a1"])
            let text = read["contents"]?.arrayValue?.first?["text"]?.stringValue ?? ""
            #expect((try? EJSONParser.parse(text))?["_id"] == "task-a1", "\(read)")
            let missing = try await agent.call("resources/read", ["uri": "ddp://tasks/task-b1"])
            #expect(missing["error"]?["code"] == .int(-32002), "\(missing)")

            // A tool no file lists, and a method not offered, are refused as unknown tools.
            let unknown = try await agent.call("tools/call", ["name": "boom", "arguments": [:]])
            #expect(unknown["error"]?["code"] == .int(-32602), "\(unknown)")
            let noMethod = try await agent.call("no/such")
            #expect(noMethod["error"]?["code"] == .int(-32601))
        }
    }

    /// A subscribed document resource: a change made by another session of the same user reaches
    /// the agent's server stream as `notifications/resources/updated`, and a change of another
    /// document does not; one server stream per MCP session.
    @Test func anAgentHearsWhenADocumentItSubscribedToChanges() async throws {
        try await BridgeHarness.run(configure: { $0.mcpNotifyInterval = .seconds(2) }) { h in
            let port = try #require(h.client.port)
            let (alice, writer, alicesAgent) = try await Self.alicesAgent(h)
            var agent = alicesAgent
            #expect(try await agent.call("resources/subscribe", ["uri": "ddp://tasks/task-a1"]) == [:])
            let bad = try await agent.call("resources/subscribe", ["uri": "http://elsewhere/x"])
            #expect(bad["error"]?["code"] == .int(-32602), "\(bad)")
            let sessionID = try #require(agent.sessionID)
            let lastNotified: String? = try await withEventStream(port: port, "/mcp", token: alice, headers: [("Mcp-Session-Id", sessionID)]) {
                stream in
                try await stream.waitUntilOpen()
                // A second server stream for the same MCP session is refused.
                let second = try await h.request(.get, "/mcp", token: alice, headers: [BridgeRoutesHeaders.session: sessionID])
                #expect(second.status == .tooManyRequests, "\(second.text)")
                let other = try await h.request(.patch, "/v1/collections/tasks/task-a2", token: writer, body: #"{"text":"other"}"#)
                #expect(other.status == .ok, "\(other.text)")
                let changed = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: writer, body: #"{"text":"changed"}"#)
                #expect(changed.status == .ok, "\(changed.text)")
                try await stream.wait("the resource's notification") { events in
                    events.contains { $0.json["method"] == "notifications/resources/updated" }
                }
                let all = await stream.events
                let notified = all.filter { $0.json["method"] == "notifications/resources/updated" }
                #expect(notified.map { $0.json["params"]?["uri"] } == ["ddp://tasks/task-a1"], "\(all)")
                // Three changes within the interval (2 s) make one notification, at its end.
                for text in ["one", "two", "three"] {
                    _ = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: writer, body: #"{"text":"\#(text)"}"#)
                }
                try await stream.wait("the coalesced notification") { events in
                    events.filter { $0.json["method"] == "notifications/resources/updated" }.count >= 2
                }
                let after = await stream.events.filter { $0.json["method"] == "notifications/resources/updated" }
                #expect(after.count == 2, "\(after)")
                return after.last?.id
            }
            // Resumed after the last notification's id: a change made while the stream was
            // closed is notified at once; with an id the log does not hold, every subscribed
            // resource is.
            let lastID = try #require(lastNotified, "the notifications carry no id")
            let whileAway = try await h.request(.patch, "/v1/collections/tasks/task-a1", token: writer, body: #"{"text":"while away"}"#)
            #expect(whileAway.status == .ok)
            try await withEventStream(port: port, "/mcp", token: alice, headers: [("Mcp-Session-Id", sessionID), ("Last-Event-ID", lastID)]) {
                stream in
                try await stream.wait("the missed change's notification") { events in
                    events.contains { $0.json["params"]?["uri"] == "ddp://tasks/task-a1" }
                }
            }
            try await withEventStream(port: port, "/mcp", token: alice, headers: [("Mcp-Session-Id", sessionID), ("Last-Event-ID", "1")]) {
                stream in
                try await stream.wait("every resource's notification") { events in
                    events.contains { $0.json["params"]?["uri"] == "ddp://tasks/task-a1" }
                }
            }
            let badID = try await h.request(
                .get, "/mcp", token: alice, headers: [BridgeRoutesHeaders.session: sessionID, HTTPField.Name("Last-Event-ID")!: "x"])
            #expect(badID.status == .badRequest)

            // Signed out there is no server stream.
            var anonymous = Agent(h, token: nil)
            _ = try await anonymous.initialize()
            let refused = try await h.request(.get, "/mcp", headers: [BridgeRoutesHeaders.session: try #require(anonymous.sessionID)])
            #expect(refused.status == .methodNotAllowed)
        }
    }

    /// An agent whose client stops reading its server stream is cut as a slow consumer, with the
    /// reason, at the stream's bound, as any stream of its session would be. Heavy (60,000
    /// documents, notifications past the sockets' buffers): run on its own by the test command.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["DDP_BRIDGE_HEAVY_TESTS"] != nil))
    func anAgentThatStopsReadingItsStreamIsCutWithAReason() async throws {
        try await BridgeHarness.run(configure: {
            $0.streamBufferLimit = 64 << 10
            $0.mcpNotifyInterval = .milliseconds(1)
        }) { h in
            let port = try #require(h.client.port)
            let (alice, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            var agent = Agent(h, token: alice)
            _ = try await agent.initialize()
            // Many resources each change reaches: notifications far past the socket's buffers.
            for limit in 1...100 {
                #expect(try await agent.call("resources/subscribe", ["uri": .string("ddp://bulk?limit=\(limit)")]) == [:])
            }
            let sessionID = try #require(agent.sessionID)
            let loader = agent
            try await withEventStream(port: port, "/mcp", token: alice, headers: [("Mcp-Session-Id", sessionID)]) { stream in
                try await stream.waitUntilOpen()
                await stream.pause()
                async let loaded = {
                    var loading = loader
                    return try await loading.tool("subscribe", ["name": "bulk", "params": [.int(60_000)]])
                }()
                // The load is done, the stream was cut meanwhile: the reader reads again and
                // finds the reason last.
                #expect(try await loaded["isError"] == false)
                await stream.resume()
                try await stream.waitUntilFinished()
                #expect(await stream.events.count < 60_000 * 100, "the backlog was dropped, not kept")
                let last = try #require(await stream.events.last)
                #expect(last.event == "error" && last.json["error"] == "slow-consumer", "\(last)")
            }
        }
    }

    /// Ending an MCP session ends its server stream, with the reason; a refusal that is not the
    /// transport's (a query past its budget) is the request's JSON-RPC error, HTTP 200.
    @Test func anEndedSessionEndsItsStreamAndRefusalsAreJSONRPCErrors() async throws {
        try await BridgeHarness.run(configure: { $0.queryTimeBudget = .nanoseconds(1) }) { h in
            let port = try #require(h.client.port)
            let (alice, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            _ = try await h.request(.post, "/v1/subscriptions", token: alice, body: #"{"name":"bulk","params":[2000],"timeout":60000}"#)
            var agent = Agent(h, token: alice)
            _ = try await agent.initialize()
            // A $nor no index answers, tested against 2,000 documents: past a budget of 1 ns.
            let clauses = (1...30).map { "{\"i\":-\($0)}" }.joined(separator: ",")
            let selector = MCPResourceURI.encoded("{\"$nor\":[\(clauses)]}")
            let expensive = try await agent.call("resources/read", ["uri": .string("ddp://bulk?selector=\(selector)")])
            #expect(expensive["error"]?["data"]?["error"] == "query-too-expensive", "\(expensive)")
            let sessionID = try #require(agent.sessionID)
            try await withEventStream(port: port, "/mcp", token: alice, headers: [("Mcp-Session-Id", sessionID)]) { stream in
                try await stream.waitUntilOpen()
                #expect(try await h.request(.delete, "/mcp", token: alice, headers: [BridgeRoutesHeaders.session: sessionID]).status == .noContent)
                try await stream.waitUntilFinished()
                let last = try #require(await stream.events.last)
                #expect(last.event == "error" && last.json["error"] == "session-ended", "\(last)")
            }
        }
    }

    /// A subscription that brings a collection the session did not hold changes the resource
    /// list: the server stream says so.
    @Test func aNewCollectionChangesTheResourceList() async throws {
        try await BridgeHarness.run { h in
            let port = try #require(h.client.port)
            let (alice, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            var agent = Agent(h, token: alice)
            _ = try await agent.initialize()
            let sessionID = try #require(agent.sessionID)
            let opened = agent
            try await withEventStream(port: port, "/mcp", token: alice, headers: [("Mcp-Session-Id", sessionID)]) { stream in
                try await stream.waitUntilOpen()
                var agent = opened
                let loaded = try await agent.tool("subscribe", ["name": "bulk", "params": [.int(3)]])
                #expect(loaded["isError"] == false, "\(loaded)")
                try await stream.wait("the list change") { events in
                    events.contains { $0.json["method"] == "notifications/resources/list_changed" }
                }
                let listed = try await agent.call("resources/list")["resources"]?.arrayValue?.compactMap { $0["uri"]?.stringValue }
                #expect(listed?.contains("ddp://bulk") == true, "\(String(describing: listed))")
            }
        }
    }

    /// Every request to the MCP endpoint has its Origin checked, reads too; an origin listed in
    /// `--mcp-allowed-origins` may use it (and only it).
    @Test func pagesOfOtherOriginsCannotUseTheEndpointUnlessListed() async throws {
        try await BridgeHarness.run(configure: { $0.mcpAllowedOrigins = ["https://agent.example"] }) { h in
            let body = #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#
            let listed = try await h.request(.post, "/mcp", body: body, headers: [.origin: "https://agent.example"])
            #expect(listed.status == .ok, "\(listed.text)")
            let sessionID = try #require(listed.headers[BridgeRoutesHeaders.session])
            let foreignRead = try await h.request(.get, "/mcp", headers: [.origin: "http://evil.example", BridgeRoutesHeaders.session: sessionID])
            #expect(foreignRead.status == .forbidden, "\(foreignRead.text)")
            #expect(foreignRead["error"] == "origin-not-allowed")
            // The listed origin is the MCP endpoint's only: REST writes from it are still refused.
            let rest = try await h.request(.post, "/v1/sessions", body: "{}", headers: [.origin: "https://agent.example"])
            #expect(rest.status == .forbidden, "\(rest.text)")
        }
    }

    /// `--mcp-path` moves the endpoint.
    @Test func theEndpointIsWhereTheSettingSays() async throws {
        try await BridgeHarness.run(configure: { $0.mcpPath = "/agents/mcp" }) { h in
            let body = #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#
            let moved = try await h.request(.post, "/agents/mcp", body: body)
            #expect(moved.status == .ok && moved.headers[BridgeRoutesHeaders.session] != nil, "\(moved.text)")
            #expect(try await h.request(.post, "/mcp", body: body).status == .notFound)
        }
    }

    @Test func theTransportsRulesHold() async throws {
        try await BridgeHarness.run { h in
            let (alice, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            var agent = Agent(h, token: alice)
            // An unknown version is answered with one spoken here.
            let initialized = try await agent.initialize(version: "1999-01-01")
            #expect(initialized["result"]?["protocolVersion"] == "2025-11-25")
            let sessionID = try #require(agent.sessionID)

            // Without the session id, 400; with an unknown one, 404; with an unspoken version, 400.
            var stranger = Agent(h, token: alice)
            #expect(try await stranger.post(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).status == .badRequest)
            stranger.sessionID = "no-such-session"
            #expect(try await stranger.post(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).status == .notFound)
            let badVersion = try await agent.post(
                #"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, headers: [BridgeRoutesHeaders.version: "1999-01-01"])
            #expect(badVersion.status == .badRequest)
            #expect(
                try await agent.post(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, headers: [BridgeRoutesHeaders.version: "2025-06-18"]).status == .ok
            )

            // Another credential cannot use the session: it does not exist for it.
            let (bob, _) = try await h.session(#"{"username":"bob","password":"hunter2"}"#)
            var thief = Agent(h, token: bob)
            thief.sessionID = sessionID
            #expect(try await thief.post(#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).status == .notFound)

            // Malformed bodies: a JSON-RPC error with HTTP 400.
            let broken = try await agent.post("{not json")
            #expect(broken.status == .badRequest)
            #expect(broken["error"]?["code"] == .int(-32700), "\(broken.text)")
            #expect(try await agent.post(#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)["error"]?["code"] == .int(-32600))

            // A server stream needs the session id.
            #expect(try await h.request(.get, "/mcp", token: alice).status == .badRequest)
            #expect(try await h.request(.head, "/mcp", token: alice, headers: [BridgeRoutesHeaders.session: sessionID]).status == .ok)

            // A page of another origin cannot drive an agent's session (DNS rebinding).
            let foreign = try await agent.post(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, headers: [.origin: "http://evil.example"])
            #expect(foreign.status == .forbidden, "\(foreign.text)")

            // DELETE ends it; it is unknown after.
            #expect(try await h.request(.delete, "/mcp", token: bob, headers: [BridgeRoutesHeaders.session: sessionID]).status == .notFound)
            #expect(try await h.request(.delete, "/mcp", token: alice, headers: [BridgeRoutesHeaders.session: sessionID]).status == .noContent)
            #expect(try await agent.post(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).status == .notFound)
        }
    }

    /// `changes_since`: the session's changes after a cursor, from its event log; a cursor the
    /// log no longer holds (or never did) is a reset.
    @Test func anAgentThatReadsNoResourceAsksForTheChangesSinceItsCursor() async throws {
        try await BridgeHarness.run { h in
            var (_, _, agent) = try await Self.alicesAgent(h)
            let start = try await agent.tool("changes_since")
            let cursor = try #require(start["structuredContent"]?["cursor"]?.intValue, "\(start)")
            #expect(start["structuredContent"]?["changes"] == [])
            // Written through the agent's own session, which answers once the change is in its
            // view (read-your-writes): the log has it when the write is answered.
            let patched = try await agent.tool("update", ["collection": "tasks", "id": "task-a2", "modifier": ["text": "seen later"]])
            #expect(patched["isError"] == false, "\(patched)")
            let answer = try await agent.tool("changes_since", ["cursor": .int(cursor)])
            let seen = answer["structuredContent"]?["changes"]?.arrayValue ?? []
            let change = try #require(seen.first { $0["event"] == "changed" }, "\(seen)")
            #expect(change["data"]?["id"] == "task-a2", "\(change)")
            #expect(change["data"]?["fields"]?["text"] == "seen later", "\(change)")
            let reset = try await agent.tool("changes_since", ["cursor": .int(1 << 40)])
            #expect(reset["structuredContent"]?["reset"] == true, "\(reset)")
            let bad = try await agent.tool("changes_since", ["cursor": .int(-1)])
            #expect(bad["isError"] == true, "\(bad)")
        }
    }

    @Test func aSignedOutAgentGetsThePublicPartAndSessionsAreBoundedPerAddress() async throws {
        let publications = try PublicPublications(parsing: "tasks(*)")
        try await BridgeHarness.run(configure: {
            $0.maxSessionsPerAddress = 2
            $0.publicPublications = publications
        }) { h in
            var anonymous = Agent(h, token: nil)
            _ = try await anonymous.initialize()
            let tools = try await anonymous.call("tools/list")["tools"]?.arrayValue?.compactMap { $0["name"]?.stringValue }
            #expect(tools == ["list_public_publications", "query_public"])
            let listed = try await anonymous.tool("list_public_publications")
            #expect(listed["isError"] == false, "\(listed)")
            let read = try await anonymous.tool(
                "query_public", ["publication": "tasks", "params": [["listId": "inbox"]], "collection": "tasks", "fields": ["listId": .int(1)]])
            let lists = read["structuredContent"]?["documents"]?.arrayValue?.compactMap { $0["listId"]?.stringValue }
            #expect(lists?.isEmpty == false && lists?.allSatisfy { $0 == "inbox" } == true, "\(read)")
            let notPublic = try await anonymous.tool("query_public", ["publication": "myTasks", "collection": "tasks"])
            #expect(notPublic["isError"] == true, "\(notPublic)")
            #expect(notPublic["structuredContent"]?["error"] == "not-public", "\(notPublic)")
            let refused = try await anonymous.call("tools/call", ["name": "query", "arguments": ["collection": "tasks"]])
            #expect(refused["error"]?["code"] == .int(-32602), "\(refused)")
            // A second session from the address, then the third is refused with the REST shape.
            var second = Agent(h, token: nil)
            #expect(try await second.initialize().status == .ok)
            var third = Agent(h, token: nil)
            let tooMany = try await third.initialize()
            #expect(tooMany.status == .tooManyRequests, "\(tooMany.text)")
            #expect(tooMany["error"] == "too-many-sessions")
            // MCP sessions hold places among the bridge's sessions: no REST session either, until
            // one MCP session ends.
            #expect(try await h.request(.post, "/v1/sessions", body: "{}").status == .tooManyRequests)
            let ended = try await h.request(.delete, "/mcp", headers: [BridgeRoutesHeaders.session: try #require(second.sessionID)])
            #expect(ended.status == .noContent)
            #expect(try await h.request(.post, "/v1/sessions", body: "{}").status == .created)
            // A credential that does not stand is refused at initialize, as REST refuses it.
            var forged = Agent(h, token: "ddpb_forged")
            #expect(try await forged.initialize().status == .unauthorized)
        }
    }
}

/// Percent-encoding for the tests' resource URIs (RFC 3986's unreserved characters kept).
enum MCPResourceURI {
    static func encoded(_ text: String) -> String {
        text.utf8.map { byte in
            let unreserved =
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || [0x2D, 0x2E, 0x5F, 0x7E].contains(byte)
            return unreserved ? String(UnicodeScalar(byte)) : "%" + String(format: "%02X", byte)
        }.joined()
    }
}
