import DDP
import DDPServer
import Foundation
import HTTPTypes
import NIOCore
import Testing

@testable import Bridge

/// The MCP layer's pure parts: messages, versions, the tools file and catalogue, resource URIs
/// and the session book, without sockets.
@Suite struct MCPProtocolTests {
    static func parse(_ text: String) -> Result<MCPProtocol.Inbound, MCPProtocol.Fault> {
        MCPProtocol.parse(text.isEmpty ? nil : try? EJSONParser.parse(text))
    }

    @Test func requestsNotificationsAndResponsesAreToldApart() throws {
        #expect(
            try Self.parse(#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).get() == .request(id: .int(1), method: "tools/list", params: [:]))
        #expect(
            try Self.parse(#"{"jsonrpc":"2.0","id":"a","method":"ping","params":{"x":1}}"#).get()
                == .request(id: "a", method: "ping", params: ["x": .int(1)]))
        #expect(
            try Self.parse(#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).get()
                == .notification(method: "notifications/initialized", params: [:]))
        #expect(try Self.parse(#"{"jsonrpc":"2.0","id":7,"result":{}}"#).get() == .response)
    }

    @Test func malformedMessagesAreRefusedWithTheirCodeAndUsableID() {
        let cases: [(String, Int, EJSON?)] = [
            ("", MCPProtocol.Fault.invalidRequest, nil),
            (#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, MCPProtocol.Fault.invalidRequest, nil),
            (#""ping""#, MCPProtocol.Fault.invalidRequest, nil),
            (#"{"id":1,"method":"ping"}"#, MCPProtocol.Fault.invalidRequest, .int(1)),
            (#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, MCPProtocol.Fault.invalidRequest, nil),
            (#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#, MCPProtocol.Fault.invalidRequest, nil),
            (#"{"jsonrpc":"2.0","id":2,"method":""}"#, MCPProtocol.Fault.invalidRequest, .int(2)),
            (#"{"jsonrpc":"2.0","id":3,"method":"ping","params":[1]}"#, MCPProtocol.Fault.invalidParams, .int(3)),
            (#"{"jsonrpc":"2.0","id":4}"#, MCPProtocol.Fault.invalidRequest, .int(4))
        ]
        for (text, code, id) in cases {
            guard case .failure(let fault) = Self.parse(text) else {
                Issue.record("accepted: \(text)")
                continue
            }
            #expect(fault.code == code, "\(text): \(fault)")
            #expect(fault.id == id, "\(text): \(fault)")
        }
    }

    @Test func answersAreJSONRPCWithTheRequestsID() throws {
        let ok = try EJSONParser.parse(MCPProtocol.response(id: "x", result: ["a": .int(1)]))
        #expect(ok == ["jsonrpc": "2.0", "id": "x", "result": ["a": .int(1)]])
        let failed = try EJSONParser.parse(MCPProtocol.error(MCPProtocol.Fault(code: -32601, message: "Method not found: x", id: nil)))
        #expect(failed == ["jsonrpc": "2.0", "id": .null, "error": ["code": .int(-32601), "message": "Method not found: x"]])
    }

    @Test func aSpokenVersionIsKeptAndAnyOtherGetsTheNewest() {
        #expect(MCPProtocol.negotiate("2024-11-05") == "2024-11-05")
        #expect(MCPProtocol.negotiate("2025-06-18") == "2025-06-18")
        #expect(MCPProtocol.negotiate("1999-01-01") == MCPProtocol.versions[0])
        #expect(MCPProtocol.negotiate(nil) == MCPProtocol.versions[0])
    }
}

@Suite struct MCPToolCatalogTests {
    @Test func theDemosToolsFileIsTheExampleAndReads() throws {
        let example = try String(contentsOfFile: "examples/mcp-tools.json", encoding: .utf8)
        #expect(example == DemoDataSet.mcpTools, "examples/mcp-tools.json and DemoDataSet.mcpTools differ")
        let catalog = try MCPToolCatalog.parse(example)
        #expect(catalog.methods.map(\.tool) == ["echo", "whoami"])
        #expect(catalog.methods.first?.positional == ["text"])
        #expect(!catalog.callMethod)
    }

    @Test func everyFormOfTheFileReadsAlike() throws {
        let list = try MCPToolCatalog.parse(#"[{"name":"tasks.add","description":"Adds","inputSchema":{"type":"object"}}]"#)
        let mapping = try MCPToolCatalog.parse(#"{"tasks.add":{"description":"Adds","inputSchema":{"type":"object"}}}"#)
        let wrapped = try MCPToolCatalog.parse(#"{"tools":[{"name":"tasks.add","description":"Adds"}],"callMethod":true}"#)
        #expect(list.methods == mapping.methods)
        #expect(list.methods == wrapped.methods)
        #expect(wrapped.callMethod)
    }

    @Test func aBadFileIsRefusedWithWhatToChange() {
        let cases: [(String, String)] = [
            ("not json", "not valid JSON"),
            (#"[{"description":"x"}]"#, "needs a \"name\""),
            (#"[{"name":"a b"}]"#, "not a tool name"),
            (#"[{"name":"query"}]"#, "is taken"),
            (#"[{"name":"x"},{"name":"x"}]"#, "is taken"),
            (#"[{"name":"x","inputSchema":{"type":"array"}}]"#, "inputSchema"),
            (#"[{"name":"x","params":[1]}]"#, "params"),
            (#"[{"name":"x","extra":1}]"#, "unknown key"),
            (#"{"tools":[],"callMethod":"yes"}"#, "callMethod"),
            ("3", "expected a list")
        ]
        for (text, expected) in cases {
            do {
                _ = try MCPToolCatalog.parse(text)
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.description.contains(expected), "\(text): \(error.description)")
            }
        }
    }

    @Test func signedOutAgentsAreOfferedThePublicToolsOnly() throws {
        let catalog = try MCPToolCatalog.parse(#"{"tools":[{"name":"echo"}],"callMethod":true}"#)
        let names = { (signedIn: Bool) in catalog.list(signedIn: signedIn)["tools"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [] }
        #expect(names(false) == ["list_public_publications", "query_public"])
        #expect(Set(names(true)).isSuperset(of: ["query", "get_document", "call_method", "echo", "insert"]))
        #expect(catalog.tool(named: "echo", signedIn: false) == nil)
        #expect(catalog.tool(named: "query", signedIn: false) == nil)
        #expect(MCPToolCatalog().tool(named: "call_method", signedIn: true) == nil, "call_method offered without the file allowing it")
    }

    @Test func aMethodsArgumentsBecomeItsParameters() {
        let positional = MCPToolCatalog.Method(
            tool: "add", method: "tasks.add", description: "", inputSchema: ["type": "object"], positional: ["text", "list", "due"])
        #expect(MCPToolCatalog.params(positional, ["text": "milk", "list": "home"]) == ["milk", "home"])
        #expect(MCPToolCatalog.params(positional, ["text": "milk", "due": .int(3)]) == ["milk", .null, .int(3)])
        #expect(MCPToolCatalog.params(positional, [:]) == [])
        let whole = MCPToolCatalog.Method(tool: "add", method: "tasks.add", description: "", inputSchema: ["type": "object"], positional: nil)
        #expect(MCPToolCatalog.params(whole, ["text": "milk"]) == [["text": "milk"]])
        #expect(MCPToolCatalog.params(whole, [:]) == [])
    }
}

@Suite struct MCPResourceTests {
    @Test func resourceURIsNameADocumentOrAQuery() throws {
        #expect(MCPResource(uri: "ddp://tasks/task-a1") == .document(collection: "tasks", id: .string("task-a1")))
        #expect(MCPResource(uri: "ddp://tasks") == .query(collection: "tasks", parameters: [:]))
        #expect(
            MCPResource(uri: "ddp://tasks?selector=%7B%22done%22%3Afalse%7D&limit=2")
                == .query(collection: "tasks", parameters: ["selector": #"{"done":false}"#, "limit": "2"]))
        #expect(MCPResource(uri: "ddp://my%20tasks") == .query(collection: "my tasks", parameters: [:]))
        for bad in [
            "http://tasks/a", "ddp://", "ddp:///a", "ddp://tasks/a/b", "ddp://tasks?other=1", "ddp://tasks?limit=1&limit=2", "ddp://tasks/a?x=1"
        ] {
            #expect(MCPResource(uri: bad) == nil, "\(bad)")
        }
        #expect(MCPResource.uri(collection: "my tasks/x") == "ddp://my%20tasks%2Fx")
        #expect(MCPResource(uri: "ddp://tasks?selector=" + String(repeating: "x", count: MCPResource.maxLength)) == nil, "a URI past the bound")
        #expect(MCPResource(uri: MCPResource.uri(collection: "my tasks/x")) == .query(collection: "my tasks/x", parameters: [:]))
    }
}

@Suite struct MCPWatchTests {
    @Test func aChangeReachesTheDocumentsAndQueriesOfItsCollection() throws {
        let watched: [String: MCPResource] = [
            "ddp://tasks/a": .document(collection: "tasks", id: .string("a")),
            "ddp://tasks/b": .document(collection: "tasks", id: .string("b")),
            "ddp://tasks?limit=2": .query(collection: "tasks", parameters: ["limit": "2"]),
            "ddp://notes/a": .document(collection: "notes", id: .string("a"))
        ]
        #expect(MCPWatch.reached(by: "tasks", "a", in: watched) == ["ddp://tasks/a", "ddp://tasks?limit=2"])
        #expect(MCPWatch.reached(by: "tasks", "c", in: watched) == ["ddp://tasks?limit=2"])
        #expect(MCPWatch.reached(by: "lists", "a", in: watched).isEmpty)
        let frame = String(decoding: MCPWatch.updated("ddp://tasks/a", id: 7), as: UTF8.self)
        #expect(frame.hasPrefix("id: 7\ndata: ") && frame.hasSuffix("\n\n"))
        let message = try EJSONParser.parse(String(frame.dropFirst(12).dropLast(2)))
        #expect(message == ["jsonrpc": "2.0", "method": "notifications/resources/updated", "params": ["uri": "ddp://tasks/a"]])
    }

    /// At most one notification per resource per interval: a change within it is held, and
    /// the resource's one notification for it goes out when the interval ends.
    @Test func notificationsAreCoalescedPerResourceAndInterval() {
        let start = ContinuousClock.now
        let second: Duration = .seconds(1)
        var notes = MCPWatch.Notes()
        var (sent, flushAt) = notes.reached(["a", "b"], by: 10, now: start, interval: second)
        #expect(sent == ["a", "b"] && flushAt == nil)
        (sent, flushAt) = notes.reached(["a"], by: 11, now: start + .milliseconds(100), interval: second)
        #expect(sent.isEmpty && flushAt == start + second, "a change within the interval is held, the flush set")
        (sent, flushAt) = notes.reached(["a", "b"], by: 12, now: start + .milliseconds(200), interval: second)
        #expect(sent.isEmpty && flushAt == nil, "the timer is set already")
        #expect(notes.covered == 10, "frames sent now say only what is notified: up to the event before the oldest held")
        (sent, flushAt) = notes.flush(now: start + second, interval: second)
        #expect(notes.covered == 12)
        #expect(sent == ["a", "b"] && flushAt == nil, "both go out once at the interval's end")
        (sent, _) = notes.reached(["a"], by: 13, now: start + .milliseconds(1500), interval: second)
        #expect(sent.isEmpty)
        notes.forget("a")
        (sent, flushAt) = notes.flush(now: start + .seconds(3), interval: second)
        #expect(sent.isEmpty && flushAt == nil, "an unsubscribed resource is not notified")
    }

    /// A resumed stream starts with one notification per subscribed resource the missed events
    /// reach; when the log no longer holds them, one per subscribed resource.
    @Test func aResumedStreamStartsWithWhatTheMissedEventsReached() {
        let watch = MCPWatch()
        _ = watch.add("ddp://tasks/a", .document(collection: "tasks", id: .string("a")))
        _ = watch.add("ddp://notes/n", .document(collection: "notes", id: .string("n")))
        let missed = [
            SessionEvent.document(.changed(collection: "tasks", id: "a", fields: ["x": 1], cleared: [], previous: [:]), document: ["x": 1], id: 5),
            SessionEvent.document(.changed(collection: "tasks", id: "a", fields: ["x": 2], cleared: [], previous: [:]), document: ["x": 2], id: 6),
            SessionEvent.document(.changed(collection: "tasks", id: "b", fields: ["x": 2], cleared: [], previous: [:]), document: ["x": 2], id: 7)
        ]
        let replayed = watch.replay(missed, through: 7).map { String(buffer: $0) }
        #expect(replayed == String(decoding: MCPWatch.updated("ddp://tasks/a", id: 7), as: UTF8.self))
        let reset = watch.replay(nil, through: 9).map { String(buffer: $0) }
        #expect(
            reset
                == String(decoding: MCPWatch.updated("ddp://notes/n", id: 9) + MCPWatch.updated("ddp://tasks/a", id: 9), as: UTF8.self))
        #expect(watch.replay([], through: 9) == nil)
    }

    /// A timer that went with its stream (it ended before the flush) leaves the next stream's
    /// coalescing working: its held notifications get a flush of their own.
    @Test func aNewStreamFlushesWhatItHoldsAfterAStreamEndedBeforeItsFlush() {
        let watch = MCPWatch(interval: .seconds(1))
        _ = watch.add("ddp://tasks/a", .document(collection: "tasks", id: .string("a")))
        let change = { (id: UInt64) in
            SessionEvent.document(.changed(collection: "tasks", id: "a", fields: ["x": 1], cleared: [], previous: [:]), document: ["x": 1], id: id)
        }
        let start = ContinuousClock.now
        #expect(watch.openStream {})
        #expect(watch.frames(for: change(1), now: start).frames != nil)
        #expect(watch.frames(for: change(2), now: start + .milliseconds(100)).flushAt != nil, "held, its flush set")
        // The stream ends before its timer flushes; the timer finds it ended.
        watch.streamClosed()
        watch.flushDropped()
        #expect(watch.openStream {})
        #expect(watch.frames(for: change(3), now: start + .milliseconds(300)).flushAt != nil, "the new stream's held notification has a flush")
    }

    /// The first document of a collection the session did not hold, or the last one of a
    /// collection gone, changes the resource list.
    @Test func aCollectionThatComesOrGoesIsAListChange() {
        let watch = MCPWatch()
        #expect(watch.openStream(collections: ["tasks": 1]) {})
        let added = { (collection: String, id: UInt64) in
            SessionEvent.document(.added(collection: collection, id: "x\(id)", fields: [:]), document: [:], id: id)
        }
        let text = { (frames: ByteBuffer?) in frames.map { String(buffer: $0) } ?? "" }
        #expect(text(watch.frames(for: added("tasks", 1), now: .now).frames).isEmpty)
        #expect(text(watch.frames(for: added("notes", 2), now: .now).frames) == String(decoding: MCPWatch.listChanged, as: UTF8.self))
        #expect(text(watch.frames(for: added("notes", 3), now: .now).frames).isEmpty, "once per collection")
        let removed = { (collection: String, id: String, event: UInt64) in
            SessionEvent.document(.removed(collection: collection, id: id, previous: [:]), document: nil, id: event)
        }
        #expect(text(watch.frames(for: removed("notes", "x2", 4), now: .now).frames).isEmpty, "one of two gone")
        #expect(text(watch.frames(for: removed("notes", "x3", 5), now: .now).frames) == String(decoding: MCPWatch.listChanged, as: UTF8.self))
        // tasks held one document and the stream saw one more added: two go before the list changes.
        #expect(text(watch.frames(for: removed("tasks", "t", 6), now: .now).frames).isEmpty)
        #expect(text(watch.frames(for: removed("tasks", "x1", 7), now: .now).frames) == String(decoding: MCPWatch.listChanged, as: UTF8.self))
    }

    @Test func aSessionWatchesAtMostItsLimitAndHasOneStream() {
        let watch = MCPWatch()
        for n in 0..<MCPWatch.limit { #expect(watch.add("ddp://tasks/\(n)", .document(collection: "tasks", id: .string("\(n)"))) == .added) }
        #expect(watch.add("ddp://tasks/more", .document(collection: "tasks", id: .string("more"))) == .refused)
        #expect(watch.add("ddp://tasks/0", .document(collection: "tasks", id: .string("0"))) == .present, "watching again is fine")
        #expect(watch.remove("ddp://tasks/0") == MCPWatch.cost(of: "ddp://tasks/0"), "its charge given back")
        #expect(watch.remove("ddp://tasks/0") == 0, "not watched: nothing to give back")
        #expect(watch.add("ddp://tasks/more", .document(collection: "tasks", id: .string("more"))) == .added)
        // Its end gives back what every resource watched was charged, and nothing is watched after.
        let charged = (1..<MCPWatch.limit).map { MCPWatch.cost(of: "ddp://tasks/\($0)") }.reduce(0, +) + MCPWatch.cost(of: "ddp://tasks/more")
        #expect(watch.release() == charged)
        #expect(watch.add("ddp://tasks/after", .document(collection: "tasks", id: .string("after"))) == .refused)
        #expect(watch.release() == 0)
        let watch2 = MCPWatch()
        #expect(watch2.openStream {})
        #expect(!watch2.openStream {})
        watch2.streamClosed()
        #expect(watch2.openStream {})
    }
}

@Suite struct MCPSessionBookTests {
    static let here = ClientKey(address: "127.0.0.1", ipv6Prefix: 64)
    static let there = ClientKey(address: "127.0.0.2", ipv6Prefix: 64)

    static func entry(_ id: String, _ address: ClientKey = here, owner: String? = "alice", at now: ContinuousClock.Instant) -> MCPSessions.Entry {
        MCPSessions.Entry(id: id, owner: owner, address: address, version: "2025-06-18", lastUsed: now, watch: MCPWatch())
    }

    @Test func sessionsAreBoundedInAllAndPerAddressAndIdleOnesMakeRoom() throws {
        let start = ContinuousClock.now
        var book = MCPSessions.Book(maxSessions: 3, maxPerAddress: 2, idleTimeout: .seconds(60))
        try book.open(Self.entry("a", at: start), now: start)
        try book.open(Self.entry("b", at: start), now: start)
        #expect(throws: MCPSessions.Refusal.tooMany(perAddress: true)) { try book.open(Self.entry("c", at: start), now: start) }
        try book.open(Self.entry("c", Self.there, at: start), now: start)
        #expect(throws: MCPSessions.Refusal.tooMany(perAddress: false)) { try book.open(Self.entry("d", Self.there, at: start), now: start) }
        // An hour on, the idle ones are dropped to make room.
        let later = start + .seconds(3600)
        try book.open(Self.entry("d", at: later), now: later)
        #expect(book.count == 1)
    }

    /// Signed-out sessions hold at most a quarter of the places; a listening session is not idle;
    /// every session the book ends is handed to the shell (its stream ends).
    @Test func signedOutSessionsHoldAQuarterAndListeningOnesStay() throws {
        let start = ContinuousClock.now
        var book = MCPSessions.Book(maxSessions: 8, maxPerAddress: 8, idleTimeout: .seconds(60))
        try book.open(Self.entry("a", owner: nil, at: start), now: start)
        try book.open(Self.entry("b", owner: nil, at: start), now: start)
        #expect(throws: MCPSessions.Refusal.tooMany(perAddress: false)) { try book.open(Self.entry("c", owner: nil, at: start), now: start) }
        try book.open(Self.entry("d", owner: "alice", at: start), now: start)
        let listening = Self.entry("e", owner: "alice", at: start)
        #expect(listening.watch.openStream {})
        try book.open(listening, now: start)
        let later = start + .seconds(3600)
        #expect(try book.use("e", owner: "alice", now: later).id == "e", "a session listening on its stream is in use")
        #expect(throws: MCPSessions.Refusal.unknown) { _ = try book.use("d", owner: "alice", now: later) }
        #expect(book.takeEnded().map(\.id) == ["d"])
        #expect(book.takeEnded().isEmpty)
    }

    @Test func aSessionIsItsOwnersAndEndsWhenIdleOrClosed() throws {
        let start = ContinuousClock.now
        var book = MCPSessions.Book(maxSessions: 10, maxPerAddress: 10, idleTimeout: .seconds(60))
        try book.open(Self.entry("a", at: start), now: start)
        #expect(throws: MCPSessions.Refusal.notYours) { _ = try book.use("a", owner: "bob", now: start) }
        #expect(throws: MCPSessions.Refusal.notYours) { _ = try book.use("a", owner: nil, now: start) }
        #expect(try book.use("a", owner: "alice", now: start + .seconds(59)).id == "a")
        // Used at 59 s: still there at 118 s, gone at 119 s.
        #expect(try book.use("a", owner: "alice", now: start + .seconds(118)).id == "a")
        #expect(throws: MCPSessions.Refusal.unknown) { _ = try book.use("a", owner: "alice", now: start + .seconds(178)) }
        #expect(book.count == 0)
        try book.open(Self.entry("b", at: start), now: start)
        #expect(throws: MCPSessions.Refusal.notYours) { try book.close("b", owner: "bob") }
        try book.close("b", owner: "alice")
        #expect(throws: MCPSessions.Refusal.unknown) { try book.close("b", owner: "alice") }
    }
}

/// An MCP session's memory and the budget, through HTTP (the budget read inside the bridge).
@Suite struct MCPBudgetTests {
    /// An MCP session's memory is charged to its address's share of the memory budget: its place,
    /// and each resource it watches. A resource past the share is refused with the bridge's
    /// `memory-share-exhausted` (before the session's own limit of resources); unsubscribing
    /// gives a resource's charge back, and the session's end gives back all of it.
    @Test func anAgentsWatchedResourcesAreChargedToItsAddressesShareOfTheMemoryBudget() async throws {
        try await BridgeHarness.run(configure: {
            $0.memoryBudget = 2 << 20
            $0.memoryShareAddress = 25  // 512 KiB for the address: about 60 long resources
        }) { h in
            let here = ClientKey(address: "127.0.0.1", ipv6Prefix: 64)
            let before = h.registry.budget.used(by: here)
            let (alice, _, alicesAgent) = try await MCPRoutesTests.alicesAgent(h)
            var agent = alicesAgent
            let opened = h.registry.budget.used(by: here)
            #expect(opened >= before + MCPSessions.baseCost, "the session's place is charged")
            let uri = { (n: Int) in "ddp://tasks/" + String(repeating: "x", count: 1_900) + "\(n)" }
            var refusal: EJSON?
            var watched = 0
            for n in 0..<MCPWatch.limit {
                let answer = try await agent.call("resources/subscribe", ["uri": .string(uri(n))])
                if let error = answer["error"] {
                    refusal = error
                    break
                }
                watched += 1
            }
            #expect(refusal?["data"]?["error"] == "memory-share-exhausted", "\(String(describing: refusal))")
            #expect(watched > 0 && watched < MCPWatch.limit, "refused by the budget, not by the session's limit: \(watched) watched")
            let full = h.registry.budget.used(by: here)
            #expect(
                full == opened + (0..<watched).map { MCPWatch.cost(of: uri($0)) }.reduce(0, +),
                "each watched resource is charged; the refused one is not")
            #expect(try await agent.call("resources/unsubscribe", ["uri": .string(uri(0))]) == [:])
            #expect(h.registry.budget.used(by: here) == full - MCPWatch.cost(of: uri(0)))
            // Room again: the next resource is watched.
            #expect(try await agent.call("resources/subscribe", ["uri": .string(uri(0))]) == [:])
            let sessionID = try #require(agent.sessionID)
            #expect(
                try await h.request(.delete, "/mcp", token: alice, headers: [MCPRoutesTests.BridgeRoutesHeaders.session: sessionID]).status
                    == .noContent)
            #expect(h.registry.budget.used(by: here) == opened - MCPSessions.baseCost, "its end gives back all it was charged")
        }
    }
}
