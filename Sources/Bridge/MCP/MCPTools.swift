import DDP

/// The tools an MCP client is offered: the bridge's own (the REST operations, named as they
/// are there) and the Meteor methods an operator's tools file lists (`--mcp-tools`; Meteor has no
/// method introspection, so nothing else is offered). Pure: the catalogue, its descriptions and
/// the mapping of a call's arguments to what the REST code takes.
public struct MCPToolCatalog: Sendable, Equatable {
    /// A Meteor method offered as a tool.
    public struct Method: Sendable, Equatable {
        /// The tool's name (the method's, unless the file gives another).
        public let tool: String
        /// The Meteor method called.
        public let method: String
        public let description: String
        public let inputSchema: EJSON
        /// The argument names, in the order the method takes its parameters; `nil`: the
        /// arguments object is the method's one parameter.
        public let positional: [String]?
    }

    public var methods: [Method] = []
    /// Whether the generic `call_method` tool (any method, by name) is offered.
    public var callMethod = false

    public init(methods: [Method] = [], callMethod: Bool = false) {
        self.methods = methods
        self.callMethod = callMethod
    }

    /// The bridge's own tools.
    enum Builtin: String, CaseIterable, Sendable {
        case listCollections = "list_collections"
        case query
        case getDocument = "get_document"
        case subscribe
        case unsubscribe
        case insert
        case update
        case remove
        case callMethod = "call_method"
        case changesSince = "changes_since"
        case listPublicPublications = "list_public_publications"
        case queryPublic = "query_public"

        /// What a client without a credential may use: reads of what the operator made public.
        var isAnonymous: Bool { self == .listPublicPublications || self == .queryPublic }
        var readOnly: Bool { [.listCollections, .query, .getDocument, .changesSince, .listPublicPublications, .queryPublic].contains(self) }
    }

    /// What a `tools/call` names.
    enum Tool: Equatable {
        case builtin(Builtin)
        case method(Method)
    }

    /// The tool named `name` for a client with (`signedIn`) or without a credential; `nil` when
    /// none is offered to it.
    func tool(named name: String, signedIn: Bool) -> Tool? {
        if let builtin = Builtin(rawValue: name), offered(builtin, signedIn: signedIn) { return .builtin(builtin) }
        guard signedIn, let method = methods.first(where: { $0.tool == name }) else { return nil }
        return .method(method)
    }

    private func offered(_ builtin: Builtin, signedIn: Bool) -> Bool {
        if builtin == .callMethod { return signedIn && callMethod }
        return signedIn || builtin.isAnonymous
    }

    /// `tools/list`'s answer for a client with or without a credential.
    func list(signedIn: Bool) -> EJSON {
        var tools: [EJSON] = Builtin.allCases.filter { offered($0, signedIn: signedIn) }.map(Self.describe)
        if signedIn {
            for method in methods {
                tools.append([
                    "name": .string(method.tool), "description": .string(method.description), "inputSchema": method.inputSchema,
                    "annotations": ["title": .string("Meteor method \(method.method)")]
                ])
            }
        }
        return ["tools": .array(tools)]
    }

    // MARK: - The bridge's own tools

    static let collection: EJSON = ["type": "string", "description": "The collection's name, as the session's subscriptions publish it"]
    /// A query's arguments beside `collection` (the REST query's parameters).
    static let queryArguments: EJSONObject = [
        "selector": ["type": "object", "description": "A Mongo selector, e.g. {\"done\": false}"],
        "sort": ["description": "A sort specifier, e.g. {\"createdAt\": -1}"],
        "skip": ["type": "integer", "minimum": 0],
        "limit": ["type": "integer", "minimum": 0, "description": "At most this many (0: the bridge's most)"],
        "fields": ["type": "object", "description": "A projection, e.g. {\"text\": 1}"]
    ]
    static let id: EJSON = ["type": "string", "description": "The document's _id (an ObjectId as 24 hex digits)"]

    static func describe(_ tool: Builtin) -> EJSON {
        let (description, properties, required): (String, EJSONObject, [String]) =
            switch tool {
            case .listCollections: ("The collections this session holds documents of, with their counts", [:], [])
            case .query:
                (
                    "Documents of a collection this session holds, as Meteor's Minimongo answers the query: {documents, count}",
                    Self.with(queryArguments, ["collection": collection]), ["collection"]
                )
            case .queryPublic:
                (
                    "Documents of a collection of a public publication (list_public_publications names them), as the query answers: {documents, count}",
                    Self.with(
                        queryArguments,
                        [
                            "publication": ["type": "string"], "params": ["type": "array", "description": "The publication's parameters"],
                            "collection": collection
                        ]), ["publication", "collection"]
                )
            case .changesSince:
                (
                    "This session's changes after a cursor (its event log): {changes, cursor, more}; omit the cursor to get the current one. {reset: true} when the cursor is older than the log: query again",
                    ["cursor": ["type": "integer", "minimum": 0, "description": "The cursor a previous call answered"]], []
                )
            case .getDocument: ("One document of a collection this session holds", ["collection": collection, "id": id], ["collection", "id"])
            case .subscribe:
                (
                    "Subscribes this session to a Meteor publication and waits until it is ready",
                    ["name": ["type": "string"], "params": ["type": "array", "description": "The publication's parameters (EJSON)"]], ["name"]
                )
            case .unsubscribe: ("Ends one of this session's subscriptions, by the id subscribe gave", ["id": ["type": "string"]], ["id"])
            case .insert:
                (
                    "Inserts a document through Meteor's collection method (the app's allow/deny rules apply)",
                    ["collection": collection, "document": ["type": "object"]], ["collection", "document"]
                )
            case .update:
                (
                    "Updates one document through Meteor's collection method: a modifier ({\"$set\": {...}}) or the fields to set",
                    ["collection": collection, "id": id, "modifier": ["type": "object"]], ["collection", "id", "modifier"]
                )
            case .remove: ("Removes one document through Meteor's collection method", ["collection": collection, "id": id], ["collection", "id"])
            case .callMethod:
                ("Calls any Meteor method by name", ["name": ["type": "string"], "params": ["type": "array"]], ["name"])
            case .listPublicPublications: ("The publications anyone may read without signing in, with their parameters", [:], [])
            }
        var schema: EJSONObject = ["type": "object", "properties": .object(properties)]
        if !required.isEmpty { schema["required"] = .array(required.map { .string($0) }) }
        return [
            "name": .string(tool.rawValue), "description": .string(description), "inputSchema": .object(schema),
            "annotations": ["readOnlyHint": .bool(tool.readOnly)]
        ]
    }

    /// `base` with the fields of `extra` after its own.
    static func with(_ base: EJSONObject, _ extra: EJSONObject) -> EJSONObject {
        var object = base
        for field in extra { object[field.key] = field.value }
        return object
    }

    /// A method tool's parameters from a call's arguments.
    static func params(_ method: Method, _ arguments: EJSONObject) -> [EJSON] {
        guard let names = method.positional else { return arguments.isEmpty ? [] : [.object(arguments)] }
        // Up to the last argument given (a method's trailing optional parameters stay absent).
        guard let last = names.lastIndex(where: { arguments[$0] != nil }) else { return [] }
        return names[...last].map { arguments[$0] ?? .null }
    }

    // MARK: - The tools file

    /// Why a tools file cannot be used.
    public struct FileError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Reads an operator's tools file (JSON): a list of `{"name", "description", "inputSchema",
    /// "tool"?, "params"?}`, a mapping from name to the same without `name`, or `{"tools": [...],
    /// "callMethod": true|false}`.
    public static func parse(_ text: String) throws(FileError) -> MCPToolCatalog {
        let value: EJSON
        do { value = try EJSONParser.parse(text) } catch { throw FileError(description: "not valid JSON: \(error)") }
        var catalog = MCPToolCatalog()
        let entries: [(String?, EJSON)]
        switch value {
        case .array(let list): entries = list.map { (nil, $0) }
        case .object(let o) where o["tools"] != nil:
            guard let list = o["tools"]?.arrayValue else { throw FileError(description: "\"tools\" must be a list") }
            if let allow = o["callMethod"] {
                guard let allow = allow.boolValue else { throw FileError(description: "\"callMethod\" must be true or false") }
                catalog.callMethod = allow
            }
            if let unknown = o.keys.first(where: { !["tools", "callMethod"].contains($0) }) {
                throw FileError(description: "unknown key \"\(unknown)\" (expected \"tools\" and \"callMethod\")")
            }
            entries = list.map { (nil, $0) }
        case .object(let o): entries = o.keys.sorted().map { ($0, o[$0] ?? .null) }
        default: throw FileError(description: "expected a list of tools, a mapping from method name to tool, or {\"tools\": [...]}")
        }
        var names = Set(Builtin.allCases.map(\.rawValue))
        for (index, (key, entry)) in entries.enumerated() {
            let method = try Self.method(entry, key: key, at: index)
            guard names.insert(method.tool).inserted else {
                throw FileError(
                    description: "tool \(index + 1): the name \"\(method.tool)\" is taken (a built-in tool or an earlier entry); set \"tool\"")
            }
            catalog.methods.append(method)
        }
        return catalog
    }

    private static func method(_ entry: EJSON, key: String?, at index: Int) throws(FileError) -> Method {
        let place = key.map { "\"\($0)\"" } ?? "tool \(index + 1)"
        guard case .object(let o) = entry else { throw FileError(description: "\(place) must be an object") }
        let known: Set<String> = ["name", "description", "inputSchema", "tool", "params"]
        if let unknown = o.keys.first(where: { !known.contains($0) }) { throw FileError(description: "\(place): unknown key \"\(unknown)\"") }
        guard let name = key ?? o["name"]?.stringValue, !name.isEmpty else { throw FileError(description: "\(place) needs a \"name\": the method's") }
        let tool = o["tool"]?.stringValue ?? name
        guard isToolName(tool) else {
            throw FileError(
                description: "\(place): \"\(tool)\" is not a tool name (1 to 128 of A-Z a-z 0-9 _ - .); set \"tool\" to name the method's tool")
        }
        let description = o["description"]?.stringValue ?? "Calls the Meteor method \(name)"
        var schema: EJSON = ["type": "object"]
        if let given = o["inputSchema"] {
            guard case .object(let s) = given, s["type"]?.stringValue == "object" else {
                throw FileError(description: "\(place): \"inputSchema\" must be a JSON Schema object with \"type\": \"object\"")
            }
            schema = given
        }
        var positional: [String]?
        if let params = o["params"] {
            guard let list = params.arrayValue, let names = Optional(list.compactMap(\.stringValue)), names.count == list.count else {
                throw FileError(description: "\(place): \"params\" must be a list of argument names, in the method's order")
            }
            positional = names
        }
        return Method(tool: tool, method: name, description: description, inputSchema: schema, positional: positional)
    }

    /// A tool name: 1 to 128 of `A-Z a-z 0-9 _ - .`.
    static func isToolName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard (1...128).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F || byte == 0x2D
                || byte == 0x2E
        }
    }
}
