/// A message a DDP server sends (Meteor's `packages/ddp/DDP.md`: connection, heartbeats, data, RPC, errors).
public enum ServerMessage: Sendable, Equatable {
    case connected(session: String)
    case failed(version: String)
    case ping(id: String?)
    case pong(id: String?)
    case nosub(id: String, error: DDPError?)
    case added(collection: String, id: String, fields: EJSONObject)
    case changed(collection: String, id: String, fields: EJSONObject, cleared: [String])
    case removed(collection: String, id: String)
    case ready(subs: [String])
    case addedBefore(collection: String, id: String, fields: EJSONObject, before: String?)
    case movedBefore(collection: String, id: String, before: String?)
    /// A method's outcome; a success may carry no value (`logout` sends no `result` field).
    case result(id: String, outcome: Result<EJSON?, DDPError>)
    case updated(methods: [String])
    case error(reason: String, offendingMessage: EJSON?)
}

extension ServerMessage {
    /// Reads a server message. `nil` for a message without `msg` (such as `{"server_id":"0"}`),
    /// which clients ignore; unknown fields are ignored; an unknown `msg` is an error.
    public static func decode(_ value: EJSON) throws(DDPMessageError) -> ServerMessage? {
        guard case .object(let o) = value else { throw DDPMessageError("a DDP message must be a JSON object") }
        guard let kind = o["msg"] else { return nil }
        guard case .string(let msg) = kind else { throw DDPMessageError("'msg' must be a string") }
        switch msg {
        case "connected": return .connected(session: try o.optionalString("session", in: msg) ?? "")
        case "failed": return .failed(version: try o.optionalString("version", in: msg) ?? "")
        case "ping": return .ping(id: try o.optionalString("id", in: msg))
        case "pong": return .pong(id: try o.optionalString("id", in: msg))
        case "nosub":
            let error = o["error"].flatMap { $0.isNull ? nil : DDPError(ejson: $0) }
            return .nosub(id: try o.requiredString("id", in: msg), error: error)
        case "added":
            return .added(
                collection: try o.requiredString("collection", in: msg),
                id: try o.requiredString("id", in: msg),
                fields: try o.fieldsObject("fields", in: msg))
        case "changed":
            return .changed(
                collection: try o.requiredString("collection", in: msg),
                id: try o.requiredString("id", in: msg),
                fields: try o.fieldsObject("fields", in: msg),
                cleared: try o.stringArray("cleared", in: msg))
        case "removed":
            return .removed(collection: try o.requiredString("collection", in: msg), id: try o.requiredString("id", in: msg))
        case "ready": return .ready(subs: try o.stringArray("subs", in: msg))
        case "addedBefore":
            return .addedBefore(
                collection: try o.requiredString("collection", in: msg),
                id: try o.requiredString("id", in: msg),
                fields: try o.fieldsObject("fields", in: msg),
                before: try o.optionalString("before", in: msg))
        case "movedBefore":
            return .movedBefore(
                collection: try o.requiredString("collection", in: msg),
                id: try o.requiredString("id", in: msg),
                before: try o.optionalString("before", in: msg))
        case "result":
            let id = try o.requiredString("id", in: msg)
            if let error = o["error"], !error.isNull { return .result(id: id, outcome: .failure(DDPError(ejson: error))) }
            return .result(id: id, outcome: .success(o["result"]))
        case "updated": return .updated(methods: try o.stringArray("methods", in: msg))
        case "error":
            return .error(reason: (try? o.optionalString("reason", in: msg)) ?? "unknown error", offendingMessage: o["offendingMessage"])
        default:
            throw DDPMessageError("unknown message type '\(msg)'")
        }
    }

    /// Parses one frame's bytes into a message (`nil`: a message to ignore).
    public static func decode(bytes: some Collection<UInt8>) throws -> ServerMessage? {
        try decode(EJSONParser.parse(bytes))
    }

    public var ejson: EJSON {
        switch self {
        case .connected(let session): return ["msg": "connected", "session": .string(session)]
        case .failed(let version): return ["msg": "failed", "version": .string(version)]
        case .ping(let id): return .heartbeat("ping", id: id)
        case .pong(let id): return .heartbeat("pong", id: id)
        case .nosub(let id, let error):
            var o: EJSONObject = ["msg": "nosub", "id": .string(id)]
            if let error { o["error"] = error.ejson }
            return .object(o)
        case .added(let collection, let id, let fields):
            return ["msg": "added", "collection": .string(collection), "id": .string(id), "fields": .object(fields)]
        case .changed(let collection, let id, let fields, let cleared):
            var o: EJSONObject = ["msg": "changed", "collection": .string(collection), "id": .string(id)]
            if !fields.isEmpty { o["fields"] = .object(fields) }
            if !cleared.isEmpty { o["cleared"] = .array(cleared.map(EJSON.string)) }
            return .object(o)
        case .removed(let collection, let id):
            return ["msg": "removed", "collection": .string(collection), "id": .string(id)]
        case .ready(let subs): return ["msg": "ready", "subs": .array(subs.map(EJSON.string))]
        case .addedBefore(let collection, let id, let fields, let before):
            return [
                "msg": "addedBefore", "collection": .string(collection), "id": .string(id), "fields": .object(fields),
                "before": before.map(EJSON.string) ?? .null
            ]
        case .movedBefore(let collection, let id, let before):
            return ["msg": "movedBefore", "collection": .string(collection), "id": .string(id), "before": before.map(EJSON.string) ?? .null]
        case .result(let id, let outcome):
            var o: EJSONObject = ["msg": "result", "id": .string(id)]
            switch outcome {
            case .success(let value): if let value { o["result"] = value }
            case .failure(let error): o["error"] = error.ejson
            }
            return .object(o)
        case .updated(let methods): return ["msg": "updated", "methods": .array(methods.map(EJSON.string))]
        case .error(let reason, let offending):
            return ["msg": "error", "reason": .string(reason), "offendingMessage": offending ?? .null]
        }
    }

    public func encode() -> [UInt8] { EJSONWriter.encode(ejson) }
}
