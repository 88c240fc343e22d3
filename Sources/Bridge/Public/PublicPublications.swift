public import DDP
import HTTPTypes

/// The publications anyone may read without a session (`--public-publications`), each with the
/// parameters it accepts. Nothing is public unless the operator names it.
///
/// The setting is a comma-separated list of entries:
/// - `name`: the publication, with no parameters;
/// - `name(string,number)`: exactly these parameters, by type (`string`, `number`, `integer`,
///   `boolean`, `null`, `object`, `array`, `any`);
/// - `name(*)`: any parameters (the operator accepts every combination a reader may send; the
///   limit on distinct public subscriptions still applies).
public struct PublicPublications: Sendable, Equatable {
    public enum ParameterType: String, Sendable, CaseIterable {
        case string, number, integer, boolean, null, object, array, any

        func admits(_ value: EJSON) -> Bool {
            switch (self, value) {
            case (.any, _): true
            case (.string, .string), (.boolean, .bool), (.null, .null), (.object, .object), (.array, .array): true
            // Finite only: NaN and the infinities (`{"$InfNaN": …}`) are what trap unwary code.
            case (.number, .number(let n)): n.isFinite
            case (.integer, .number(let n)): n.isFinite && n == n.rounded() && abs(n) <= 9_007_199_254_740_991
            default: false
            }
        }
    }

    /// What one public publication accepts: these parameters by type, or anything (`nil`).
    public struct Entry: Sendable, Equatable {
        public let name: String
        public let parameters: [ParameterType]?

        /// As `GET /v1/public/publications` and the help show it.
        public var signature: String {
            guard let parameters else { return "\(name)(*)" }
            return parameters.isEmpty ? name : "\(name)(\(parameters.map(\.rawValue).joined(separator: ",")))"
        }
    }

    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public private(set) var entries: [String: Entry] = [:]

    public init() {}

    /// Parses the setting's text; refuses what it cannot read, naming the entry.
    public init(parsing text: String) throws(Invalid) {
        var depth = 0
        var current = ""
        var parts: [String] = []
        for character in text {
            switch character {
            case "(": depth += 1
            case ")": depth -= 1
            case "," where depth == 0:
                parts.append(current)
                current = ""
                continue
            default: break
            }
            guard depth >= 0, depth <= 1 else { throw Invalid(description: "unbalanced parentheses in '\(text)'") }
            current.append(character)
        }
        guard depth == 0 else { throw Invalid(description: "unbalanced parentheses in '\(text)'") }
        parts.append(current)
        for part in parts {
            let entry = part.trimmingSpaces
            guard !entry.isEmpty else { continue }
            let parsed = try Self.entry(entry)
            guard entries[parsed.name] == nil else { throw Invalid(description: "'\(parsed.name)' is named twice") }
            entries[parsed.name] = parsed
        }
    }

    private static func entry(_ text: Substring) throws(Invalid) -> Entry {
        guard let open = text.firstIndex(of: "(") else {
            try checkName(text)
            return Entry(name: String(text), parameters: [])
        }
        guard text.last == ")" else { throw Invalid(description: "'\(text)' must end with ')'") }
        let name = text[..<open].trimmingSpaces
        try checkName(name)
        let inside = text[text.index(after: open)..<text.index(before: text.endIndex)].trimmingSpaces
        if inside == "*" { return Entry(name: String(name), parameters: nil) }
        var types: [ParameterType] = []
        for word in inside.split(separator: ",", omittingEmptySubsequences: false) {
            let word = word.trimmingSpaces
            if word.isEmpty, inside.isEmpty { break }
            guard let type = ParameterType(rawValue: String(word)) else {
                let known = ParameterType.allCases.map(\.rawValue).joined(separator: ", ")
                throw Invalid(description: "'\(word)' in '\(text)' is not a parameter type (\(known), or * alone for any)")
            }
            types.append(type)
        }
        guard types.count <= 16 else { throw Invalid(description: "'\(text)' has more than 16 parameters") }
        return Entry(name: String(name), parameters: types)
    }

    private static func checkName(_ name: Substring) throws(Invalid) {
        guard !name.isEmpty, name.utf8.count <= 200, !name.contains(where: { $0 == "(" || $0 == ")" || $0 == "," || $0.isWhitespace }) else {
            throw Invalid(description: "'\(name)' is not a publication name")
        }
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The most bytes a public subscription's parameters may take, encoded.
    public static let maxParameterBytes = 4096

    /// Refuses (403) a publication the operator did not make public, before its parameters are read.
    public func check(_ name: String) throws(BridgeError) {
        guard entries[name] != nil else {
            throw BridgeError(
                .notPublic, "Publication '\(name.prefix(200))' is not public on this bridge (see GET /v1/public/publications)")
        }
    }

    /// Refuses (403, or 400 for parameters of the wrong shape or size) what the operator did not make public.
    public func check(_ name: String, _ params: [EJSON]) throws(BridgeError) {
        try check(name)
        guard let entry = entries[name] else { return }
        let encoded = EJSONWriter.encode(.array(params))
        guard encoded.count <= Self.maxParameterBytes else {
            throw BridgeError(.invalidParams, "Public parameters may take at most \(Self.maxParameterBytes) bytes of JSON")
        }
        guard let types = entry.parameters else { return }
        guard types.count == params.count, zip(types, params).allSatisfy({ $0.admits($1) }) else {
            throw BridgeError(
                .invalidParams,
                "Publication '\(name)' takes public parameters \(entry.signature); got \(String(decoding: encoded.prefix(200), as: UTF8.self))")
        }
    }

    /// The list, sorted by name, as `GET /v1/public/publications` shows it.
    public var ejson: EJSON {
        .array(
            entries.values.sorted { $0.name < $1.name }.map { entry in
                [
                    "name": .string(entry.name), "signature": .string(entry.signature),
                    "params": entry.parameters.map { .array($0.map { .string($0.rawValue) }) } ?? .string("*")
                ]
            })
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: Substring {
        var text = self[...]
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return Substring(text)
    }
}
