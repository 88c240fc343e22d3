/// A message a DDP client sends (Meteor's `packages/ddp/DDP.md` — connect, heartbeats, subs, methods).
public enum ClientMessage: Sendable, Equatable {
    case connect(version: String, support: [String])
    case ping(id: String?)
    case pong(id: String?)
    case sub(id: String, name: String, params: [EJSON])
    case unsub(id: String)
    case method(id: String, method: String, params: [EJSON], randomSeed: EJSON?)
}

extension ClientMessage {
    /// Reads a client message; `nil` when it has no `msg` field (such messages are ignored).
    /// Errors carry the reason Meteor's server gives for malformed input.
    public static func decode(_ value: EJSON) throws(DDPMessageError) -> ClientMessage? {
        guard case .object(let o) = value else { throw DDPMessageError("Bad request") }
        guard let kind = o["msg"] else { return nil }
        guard case .string(let msg) = kind else { throw DDPMessageError("Bad request") }
        switch msg {
        case "connect":
            guard case .string(let version)? = o["version"] else { throw DDPMessageError("Bad request") }
            let support = (try? o.stringArray("support", in: msg)) ?? []
            return .connect(version: version, support: support)
        case "ping": return .ping(id: o["id"]?.stringValue)
        case "pong": return .pong(id: o["id"]?.stringValue)
        case "sub":
            guard case .string(let id)? = o["id"], case .string(let name)? = o["name"],
                let params = try? o.params("params", in: msg)
            else { throw DDPMessageError("Malformed subscription") }
            return .sub(id: id, name: name, params: params)
        case "unsub":
            guard case .string(let id)? = o["id"] else { throw DDPMessageError("Malformed unsub") }
            return .unsub(id: id)
        case "method":
            guard case .string(let id)? = o["id"], case .string(let method)? = o["method"],
                let params = try? o.params("params", in: msg)
            else { throw DDPMessageError("Malformed method invocation") }
            let seed = o["randomSeed"]
            if let seed, seed.stringValue == nil { throw DDPMessageError("Malformed method invocation") }
            return .method(id: id, method: method, params: params, randomSeed: seed)
        default:
            throw DDPMessageError("Bad request")
        }
    }

    public var ejson: EJSON {
        switch self {
        case .connect(let version, let support):
            return ["msg": "connect", "version": .string(version), "support": .array(support.map(EJSON.string))]
        case .ping(let id): return .heartbeat("ping", id: id)
        case .pong(let id): return .heartbeat("pong", id: id)
        case .sub(let id, let name, let params):
            return ["msg": "sub", "id": .string(id), "name": .string(name), "params": .array(params)]
        case .unsub(let id):
            return ["msg": "unsub", "id": .string(id)]
        case .method(let id, let method, let params, let seed):
            var o: EJSONObject = ["msg": "method", "id": .string(id), "method": .string(method), "params": .array(params)]
            if let seed { o["randomSeed"] = seed }
            return .object(o)
        }
    }

    public func encode() -> [UInt8] { EJSONWriter.encode(ejson) }
}
