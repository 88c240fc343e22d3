import DDP
import Foundation

/// A recorded transcript as a list of steps per WebSocket connection.
struct Transcript {
    enum Step: Sendable {
        case clientSends(EJSON)
        case clientSendsRaw(String)
        case clientCloses
        case serverSends(EJSON)
        case serverCloses
    }

    struct Connection: Sendable {
        let number: Int
        var steps: [Step]
    }

    var connections: [Connection] = []

    static func load(_ name: String) throws -> Transcript {
        let url = Bundle.module.url(forResource: "Fixtures", withExtension: nil)!
            .appendingPathComponent("transcripts").appendingPathComponent("\(name).jsonl")
        var transcript = Transcript()
        for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") {
            let entry = try EJSONParser.parse(String(line))
            let number = entry["conn"]?.intValue ?? 1
            if transcript.connections.last?.number != number { transcript.connections.append(Connection(number: number, steps: [])) }
            let client = entry["dir"] == "client"
            let step: Step
            if let message = entry["msg"] {
                step = client ? .clientSends(message) : .serverSends(message)
            } else if let raw = entry["raw"]?.stringValue {
                step = .clientSendsRaw(raw)
            } else {
                step = client ? .clientCloses : .serverCloses
            }
            transcript.connections[transcript.connections.count - 1].steps.append(step)
        }
        return transcript
    }
}

/// Matches recorded messages against live ones. Strings that are random on every
/// recording (17-character Meteor ids, 43-character tokens) bind to the live value on
/// first sight and must match it afterwards; `tokenExpires` dates may differ.
struct Bindings: Sendable {
    static let fixed: Set<String> = ["devBuvC559TzDB3E9", "task-a1", "task-a2", "task-b1", "typed1", "t1"]
    private var map: [String: String] = [:]

    static func isRandom(_ s: String) -> Bool {
        guard !fixed.contains(s) else { return false }
        let id = s.count == 17 && s.allSatisfy { MeteorRandom.unmistakableCharacters.contains($0) }
        let token = s.count == 43 && s.allSatisfy { MeteorRandom.base64Characters.contains($0) }
        return id || token
    }

    /// Replaces bound recorded values by their live counterparts (a resume token from an earlier connection).
    func substitute(_ value: EJSON) -> EJSON {
        switch value {
        case .string(let s): return .string(map[s] ?? s)
        case .array(let a): return .array(a.map(substitute))
        case .object(let o): return .object(EJSONObject(o.fields.map { .init(key: $0.key, value: substitute($0.value)) }))
        default: return value
        }
    }

    /// `nil` when they match (binding what is new), else what differs.
    mutating func match(expected: EJSON, actual: EJSON, path: String = "", key: String = "") -> String? {
        switch (expected, actual) {
        case (.string(let e), .string(let a)) where Self.isRandom(e):
            if let bound = map[e] { return bound == a ? nil : "\(path): \(a) but \(e) was bound to \(bound)" }
            guard Self.isRandom(a) || a.count == e.count else { return "\(path): \(a) is not a random id like \(e)" }
            map[e] = a
            return nil
        case (.date, .date) where key == "tokenExpires":
            return nil
        case (.array(let e), .array(let a)):
            guard e.count == a.count else { return "\(path): \(a.count) elements, expected \(e.count)" }
            for i in e.indices {
                if let problem = match(expected: e[i], actual: a[i], path: "\(path)[\(i)]") { return problem }
            }
            return nil
        case (.object(let e), .object(let a)):
            guard e.keys == a.keys else { return "\(path): keys \(a.keys), expected \(e.keys)" }
            for field in e {
                if let problem = match(expected: field.value, actual: a[field.key]!, path: "\(path).\(field.key)", key: field.key) { return problem }
            }
            return nil
        default:
            return expected.equals(actual, keyOrderSensitive: true) ? nil : "\(path): \(actual), expected \(expected)"
        }
    }
}
