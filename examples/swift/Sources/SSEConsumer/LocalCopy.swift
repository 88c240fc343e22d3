import Foundation

/// The documents by collection and id, and the id of the last event applied to them.
struct LocalCopy: Codable, Sendable {
    var lastEventId: String?
    var documents: [String: [String: [String: JSON]]] = [:]

    /// The payload of `added`, `changed` and `removed`.
    private struct Change: Decodable {
        let collection: String
        let id: String
        var fields: [String: JSON]?
        var cleared: [String]?
    }

    mutating func apply(_ event: ServerSentEvent) throws {
        switch event.event {
        case "reset":
            documents = [:]
        case "added", "changed", "removed":
            let change = try JSONDecoder().decode(Change.self, from: Data(event.data.utf8))
            switch event.event {
            case "added":
                documents[change.collection, default: [:]][change.id] = change.fields ?? [:]
            case "changed":
                var document = documents[change.collection]?[change.id] ?? [:]
                document.merge(change.fields ?? [:]) { _, new in new }
                for field in change.cleared ?? [] { document[field] = nil }
                documents[change.collection, default: [:]][change.id] = document
            default:
                documents[change.collection]?[change.id] = nil
            }
        default:
            break
        }
        // Only whole states carry an id: the documents of a snapshot have none, its marker has.
        if let id = event.id { lastEventId = id }
    }

    /// The copy as one line of JSON, keys sorted.
    func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }
}

/// Any JSON value, as event payloads carry them.
enum JSON: Codable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer()
        if value.decodeNil() {
            self = .null
        } else if let bool = try? value.decode(Bool.self) {
            self = .bool(bool)
        } else if let number = try? value.decode(Double.self) {
            self = .number(number)
        } else if let string = try? value.decode(String.self) {
            self = .string(string)
        } else if let array = try? value.decode([JSON].self) {
            self = .array(array)
        } else {
            self = .object(try value.decode([String: JSON].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let bool): try container.encode(bool)
        case .number(let number): try container.encode(number)
        case .string(let string): try container.encode(string)
        case .array(let array): try container.encode(array)
        case .object(let object): try container.encode(object)
        }
    }
}
