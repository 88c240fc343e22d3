/// Reading a message's fields, each with the error a malformed message gets
/// (``DDPMessageError``): used by both ``ClientMessage`` and ``ServerMessage`` decoding.
extension EJSONObject {
    func requiredString(_ key: String, in kind: String) throws(DDPMessageError) -> String {
        guard case .string(let s)? = self[key] else {
            throw DDPMessageError("'\(kind)' message needs a string '\(key)'")
        }
        return s
    }

    func optionalString(_ key: String, in kind: String) throws(DDPMessageError) -> String? {
        switch self[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw DDPMessageError("'\(kind)' message has a non-string '\(key)'")
        }
    }

    func stringArray(_ key: String, in kind: String) throws(DDPMessageError) -> [String] {
        guard let value = self[key] else { return [] }
        guard case .array(let elements) = value else { throw DDPMessageError("'\(kind)' message needs an array '\(key)'") }
        var out: [String] = []
        out.reserveCapacity(elements.count)
        for element in elements {
            guard case .string(let s) = element else { throw DDPMessageError("'\(kind)' message '\(key)' must hold strings") }
            out.append(s)
        }
        return out
    }

    func params(_ key: String, in kind: String) throws(DDPMessageError) -> [EJSON] {
        switch self[key] {
        case nil: return []
        case .array(let a)?: return a
        default: throw DDPMessageError("'\(kind)' message needs an array '\(key)'")
        }
    }

    func fieldsObject(_ key: String, in kind: String) throws(DDPMessageError) -> EJSONObject {
        switch self[key] {
        case nil, .null?: return EJSONObject()
        case .object(let o)?: return o
        default: throw DDPMessageError("'\(kind)' message needs an object '\(key)'")
        }
    }
}

extension EJSON {
    /// `{"msg": "ping" | "pong"}` with the optional `id` (docs/ARCHITECTURE.md, "protocol facts"), sent by both sides.
    static func heartbeat(_ kind: String, id: String?) -> EJSON {
        var o: EJSONObject = ["msg": .string(kind)]
        if let id { o["id"] = .string(id) }
        return .object(o)
    }
}
