import DDP

/// The Model Context Protocol's messages as the bridge reads and writes them: JSON-RPC 2.0, one
/// message per POST (the Streamable HTTP transport), parsed with the bridge's own EJSON parser
/// and written with its writer, so a tool's documents are the same EJSON as REST's. Pure: no
/// I/O, no session; tested without sockets (`MCPProtocolTests`). docs/MCP.md says what a client
/// sees; docs/ARCHITECTURE.md why this is not the SDK.
enum MCPProtocol {
    /// The versions the bridge speaks, newest first. The first is what an `initialize` asking
    /// for another gets (the specification: the server's latest).
    static let versions = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]

    /// What a request without an `MCP-Protocol-Version` header is taken to speak, when its
    /// session does not say (the specification's default).
    static let assumedVersion = "2025-03-26"

    /// The version answered to an `initialize` asking for `requested`: the same when spoken here,
    /// else the newest spoken here.
    static func negotiate(_ requested: String?) -> String {
        guard let requested, versions.contains(requested) else { return versions[0] }
        return requested
    }

    /// A JSON-RPC 2.0 message from the client.
    enum Inbound: Equatable, Sendable {
        /// A request: it gets a response with its `id` (a string or an integer).
        case request(id: EJSON, method: String, params: EJSONObject)
        /// A notification: nothing answers it (HTTP 202).
        case notification(method: String, params: EJSONObject)
        /// The client's answer to a request of the server's (the bridge sends none): accepted.
        case response
    }

    /// A JSON-RPC error: its code, message and the request's id when it had a usable one.
    struct Fault: Error, Equatable, Sendable {
        let code: Int
        let message: String
        var id: EJSON?
        var data: EJSON?

        static let parseError = -32700
        static let invalidRequest = -32600
        static let methodNotFound = -32601
        static let invalidParams = -32602
        static let internalError = -32603

        static func invalidParams(_ message: String, id: EJSON? = nil) -> Fault { Fault(code: invalidParams, message: message, id: id) }
    }

    /// Reads one message from a POST's body (`nil`: empty). A batch (a JSON array) is refused:
    /// the transport's current version sends one message per POST.
    static func parse(_ body: EJSON?) -> Result<Inbound, Fault> {
        guard let body else { return .failure(Fault(code: Fault.invalidRequest, message: "The body must be one JSON-RPC 2.0 message; it was empty")) }
        guard case .object(let message) = body else {
            let what = body.arrayValue != nil ? "a batch (an array): send one message per POST" : body.typeName
            return .failure(Fault(code: Fault.invalidRequest, message: "The body must be one JSON-RPC 2.0 message (an object), not \(what)"))
        }
        let id = message["id"]
        // (Not `flatMap { … ? $0 : nil }`: EJSON takes `nil` as its null, which is a value.)
        var usableID: EJSON?
        if let id, isValidID(id) { usableID = id }
        guard message["jsonrpc"]?.stringValue == "2.0" else {
            return .failure(Fault(code: Fault.invalidRequest, message: "\"jsonrpc\" must be \"2.0\"", id: usableID))
        }
        if let id, usableID == nil {
            return .failure(Fault(code: Fault.invalidRequest, message: "\"id\" must be a string or an integer, not \(id.typeName)"))
        }
        guard let method = message["method"] else {
            // A response to a server's request: it carries a result or an error.
            guard usableID != nil, message["result"] != nil || message["error"] != nil else {
                return .failure(Fault(code: Fault.invalidRequest, message: "A message needs a \"method\" (a request or notification)", id: usableID))
            }
            return .success(.response)
        }
        guard let name = method.stringValue, !name.isEmpty else {
            return .failure(Fault(code: Fault.invalidRequest, message: "\"method\" must be a non-empty string", id: usableID))
        }
        let params: EJSONObject
        switch message["params"] {
        case nil, .null?: params = [:]
        case .object(let o)?: params = o
        case let other?:
            return .failure(Fault(code: Fault.invalidParams, message: "\"params\" must be an object, not \(other.typeName)", id: usableID))
        }
        guard let usableID else { return .success(.notification(method: name, params: params)) }
        return .success(.request(id: usableID, method: name, params: params))
    }

    /// A JSON-RPC id: a string, or a number that is an integer.
    static func isValidID(_ id: EJSON) -> Bool {
        switch id {
        case .string: true
        case .number: id.intValue != nil
        default: false
        }
    }

    /// `{"jsonrpc": "2.0", "id": …, "result": …}`.
    static func response(id: EJSON, result: EJSON) -> [UInt8] {
        EJSONWriter.encode(["jsonrpc": "2.0", "id": id, "result": result])
    }

    /// `{"jsonrpc": "2.0", "id": … or null, "error": {"code", "message", "data"?}}`.
    static func error(_ fault: Fault) -> [UInt8] {
        var error: EJSONObject = ["code": .int(fault.code), "message": .string(fault.message)]
        if let data = fault.data { error["data"] = data }
        return EJSONWriter.encode(["jsonrpc": "2.0", "id": fault.id ?? .null, "error": .object(error)])
    }

    /// Whether a client's `Mcp-Session-Id` can be one: visible ASCII only (the transport's rule),
    /// at most 128 bytes.
    static func isValidSessionID(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.count <= 128 && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}
