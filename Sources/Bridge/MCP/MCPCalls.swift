import DDP

/// A tool call's arguments, read with the REST routes' names and rules: what is missing or of
/// the wrong type is a 400 `bad-request` (a tool error the agent can correct).
struct MCPArguments {
    let values: EJSONObject

    init(_ values: EJSONObject) { self.values = values }

    func required(_ name: String) throws(BridgeError) -> EJSON {
        guard let value = values[name], !value.isNull else { throw .badRequest("\(name) is required") }
        return value
    }

    /// A non-empty string.
    func string(_ name: String) throws(BridgeError) -> String {
        guard let text = try required(name).stringValue, !text.isEmpty else { throw .badRequest("\(name) must be a non-empty string") }
        return text
    }

    /// A value as the JSON text a REST query string carries (`nil`: not given).
    func json(_ name: String) throws(BridgeError) -> String? {
        guard let value = values[name], !value.isNull else { return nil }
        return String(decoding: EJSONWriter.encode(value), as: UTF8.self)
    }

    /// An integer as the text a REST query string carries (`nil`: not given).
    func integerText(_ name: String) throws(BridgeError) -> String? {
        guard let value = values[name], !value.isNull else { return nil }
        guard let n = value.intValue else { throw .badRequest("\(name) must be an integer, not \(value.typeName)") }
        return String(n)
    }

    /// A list (empty when not given).
    func array(_ name: String) throws(BridgeError) -> EJSON {
        guard let value = values[name], !value.isNull else { return .array([]) }
        guard value.arrayValue != nil else { throw .badRequest("\(name) must be an array, not \(value.typeName)") }
        return value
    }

    /// The REST query's parameters (`selector`, `sort`, `skip`, `limit`, `fields`), read as REST
    /// reads them.
    func documentQuery(_ limits: DocumentQuery.Limits) throws(BridgeError) -> DocumentQuery {
        try DocumentQuery(
            selector: try json("selector"), sort: try json("sort"), skip: try integerText("skip"), limit: try integerText("limit"),
            fields: try json("fields"), limits: limits)
    }

    /// A document id as REST's path carries it (an ObjectId as 24 hex digits).
    func documentID(_ name: String) throws(BridgeError) -> DocumentID {
        let text = try string(name)
        do { return try DocumentID(wire: text) } catch { throw .badRequest("invalid \(name): \(error.reason)") }
    }
}

/// A tool's answer as MCP carries it.
enum MCPToolResult {
    /// The answer as `structuredContent` and, for clients that read text only, the same JSON
    /// as a text block.
    static func success(_ value: EJSON) -> EJSON {
        [
            "content": [["type": "text", "text": .string(String(decoding: EJSONWriter.encode(value), as: UTF8.self))]],
            "structuredContent": value, "isError": false
        ]
    }

    /// A refusal as a tool error: the bridge's error shape (`error`, `reason`, …) as
    /// `structuredContent`, and its reason as text.
    static func failure(_ error: BridgeError) -> EJSON {
        [
            "content": [["type": "text", "text": .string("\(error.error.description): \(error.reason)")]], "structuredContent": error.body,
            "isError": true
        ]
    }

    /// A REST answer's bytes as a value (the same EJSON either way).
    static func decoded(_ bytes: [UInt8]) throws(BridgeError) -> EJSON {
        do { return try EJSONParser.parse(bytes) } catch { throw BridgeError(.internalError, "an answer could not be read back: \(error)") }
    }
}

/// What a `ddp://` resource URI names: one document (`ddp://{collection}/{id}`) or a query of a
/// collection (`ddp://{collection}?selector=…&sort=…&skip=…&limit=…&fields=…`, the REST query's
/// parameters). Components are percent-encoded.
enum MCPResource: Equatable {
    case document(collection: String, id: DocumentID)
    case query(collection: String, parameters: [String: String])

    /// MCP's code for a resource that does not exist.
    static let notFound = -32002

    static let scheme = "ddp://"
    /// The longest URI taken (a session keeps the URIs it watches).
    static let maxLength = 2048

    init?(uri: String) {
        guard uri.hasPrefix(Self.scheme), uri.utf8.count <= Self.maxLength else { return nil }
        let rest = uri.dropFirst(Self.scheme.count)
        let parts = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts[0].split(separator: "/", omittingEmptySubsequences: false)
        guard let collection = String(path[0]).percentDecoded, !collection.isEmpty else { return nil }
        switch path.count {
        case 1:
            var parameters: [String: String] = [:]
            if parts.count == 2 {
                for pair in parts[1].split(separator: "&") {
                    let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    guard let key = String(kv[0]).percentDecoded, let value = (kv.count == 2 ? String(kv[1]) : "").percentDecoded,
                        ["selector", "sort", "skip", "limit", "fields"].contains(key), parameters[key] == nil
                    else { return nil }
                    parameters[key] = value
                }
            }
            self = .query(collection: collection, parameters: parameters)
        case 2:
            guard parts.count == 1, let text = String(path[1]).percentDecoded, let id = try? DocumentID(wire: text) else { return nil }
            self = .document(collection: collection, id: id)
        default:
            return nil
        }
    }

    /// The URI of a collection's documents (its name percent-encoded where it must be).
    static func uri(collection: String) -> String { scheme + encoded(collection) }

    /// Bytes other than RFC 3986's unreserved ones as `%XX`.
    static func encoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            let unreserved =
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || [0x2D, 0x2E, 0x5F, 0x7E].contains(byte)
            if unreserved {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
