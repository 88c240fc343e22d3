/// A document id as Meteor's `mongo-id` package carries it on the wire.
///
/// Strings travel as they are, except that a string starting with `-`, `~` or `{`, or one
/// that looks like an ObjectId, gets a `-` prefix; an ObjectId travels as its 24 hex digits;
/// numbers, booleans and null travel as `~` followed by their JSON.
public enum DocumentID: Sendable, Hashable {
    case string(String)
    case objectID(String)
    case number(Double)
    case bool(Bool)
    case null
    /// `undefined` in JavaScript; wire form `-`.
    case undefined

    /// Decodes a wire id (`MongoID.idParse`).
    public init(wire: String) throws(EJSONParseError) {
        guard let first = wire.utf8.first else {
            self = .string("")
            return
        }
        if wire == "-" {
            self = .undefined
        } else if first == UInt8(ascii: "-") {
            self = .string(String(wire.dropFirst()))
        } else if first == UInt8(ascii: "~") {
            switch try EJSONParser.parse(String(wire.dropFirst())) {
            case .number(let n): self = .number(n)
            case .bool(let b): self = .bool(b)
            case .null: self = .null
            case let other: throw EJSONParseError(offset: 1, reason: "a '~' id must hold a number, boolean or null, not \(other.typeName)")
            }
        } else if Self.looksLikeObjectID(wire) {
            self = .objectID(wire)
        } else {
            self = .string(wire)
        }
    }

    /// The id as it appears in a document's `_id` field.
    public init(ejson: EJSON) throws(EJSONParseError) {
        switch ejson {
        case .string(let s): self = .string(s)
        case .number(let n): self = .number(n)
        case .bool(let b): self = .bool(b)
        case .null: self = .null
        case .custom(type: "oid", value: .string(let hex)) where Self.looksLikeObjectID(hex.lowercased()):
            self = .objectID(hex.lowercased())
        default: throw EJSONParseError(offset: 0, reason: "an _id must be a string, number, boolean or ObjectId, not \(ejson.typeName)")
        }
    }

    /// The wire form (`MongoID.idStringify`).
    public var wire: String {
        switch self {
        case .objectID(let hex): return hex
        case .string(let s):
            guard let first = s.utf8.first else { return s }
            if first == UInt8(ascii: "-") || first == UInt8(ascii: "~") || first == UInt8(ascii: "{") || Self.looksLikeObjectID(s) {
                return "-" + s
            }
            return s
        case .undefined: return "-"
        case .number(let n): return "~" + EJSON.number(n).description
        case .bool(let b): return b ? "~true" : "~false"
        case .null: return "~null"
        }
    }

    /// The id as a document's `_id` value.
    public var ejson: EJSON {
        switch self {
        case .string(let s): .string(s)
        case .objectID(let hex): .custom(type: "oid", value: .string(hex))
        case .number(let n): .number(n)
        case .bool(let b): .bool(b)
        case .null, .undefined: .null
        }
    }

    static func looksLikeObjectID(_ s: String) -> Bool {
        s.utf8.count == 24 && s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
