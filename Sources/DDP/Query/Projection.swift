/// A field projection, applied as Minimongo's `_compileProjection` applies it: `{"a": 1, "b.c": 1}`
/// keeps those fields (and `_id` unless `"_id": 0`), `{"a": 0}` drops them. A dotted path reaches
/// through objects and into every element of an array; with inclusion, an array element that is
/// no object becomes `{}` (`null` stays `null`), as in Minimongo.
public struct Projection: Sendable {
    indirect enum Rule: Sendable {
        case leaf
        case tree([(key: String, rule: Rule)])
    }

    /// `nil` when no field is named: the whole document.
    let including: Bool?
    let rules: [(key: String, rule: Rule)]
    /// Whether `_id` stays (`_idProjection`).
    let keepsID: Bool

    public init(_ value: EJSON) throws(SelectorError) {
        guard case .object(let object) = value else { throw SelectorError("fields must be an object like {\"name\": 1}") }
        for field in object {
            if field.key.split(separator: ".", omittingEmptySubsequences: false).contains("$") {
                throw SelectorError("the positional $ is not supported in fields ('\(field.key)')")
            }
            switch field.value {
            case .number(1), .number(0), .bool: continue
            case .object(let o) where o.keys.contains(where: { ["$elemMatch", "$meta", "$slice"].contains($0) }):
                throw SelectorError("operators in fields ($elemMatch, $meta, $slice) are not supported ('\(field.key)')")
            default: throw SelectorError("fields values must be 1, 0, true or false ('\(field.key)')")
            }
        }
        keepsID = object["_id"].map(\.isTruthy) ?? true
        // `_id` alone, or an inclusive `_id`, counts like any field; an exclusive `_id` beside
        // other fields is always allowed, so it does not decide the mode.
        var keys = object.fields.sorted { EJSON.utf16Order($0.key, $1.key) == .less }
        let idDecides = keys.count == 1 && keys[0].key == "_id" || keys.contains { $0.key == "_id" && $0.value.isTruthy }
        if !idDecides { keys.removeAll { $0.key == "_id" } }
        var including: Bool?
        for field in keys {
            let rule = field.value.isTruthy
            if including == nil { including = rule }
            if including != rule { throw SelectorError("fields cannot mix inclusion and exclusion") }
        }
        self.including = including
        var rules: [(key: String, rule: Rule)] = []
        for field in keys {
            let parts = field.key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            try Self.insert(parts[...], into: &rules, path: field.key)
        }
        self.rules = rules
    }

    /// `pathsToTree`: a path that runs through another one named as a whole is refused.
    private static func insert(_ parts: ArraySlice<String>, into rules: inout [(key: String, rule: Rule)], path: String) throws(SelectorError) {
        guard let key = parts.first else { return }
        let position = rules.firstIndex { EJSON.sameCodeUnits($0.key, key) }
        if parts.count == 1 {
            guard position == nil else { throw Self.overlap(path) }
            rules.append((key, .leaf))
            return
        }
        guard let position else {
            var sub: [(key: String, rule: Rule)] = []
            try insert(parts.dropFirst(), into: &sub, path: path)
            rules.append((key, .tree(sub)))
            return
        }
        guard case .tree(var sub) = rules[position].rule else { throw Self.overlap(path) }
        try insert(parts.dropFirst(), into: &sub, path: path)
        rules[position].rule = .tree(sub)
    }

    private static func overlap(_ path: String) -> SelectorError {
        SelectorError("fields name '\(path)' and a path that contains it: use only one of them")
    }

    /// The document as the projection leaves it.
    /// Throws where Minimongo does: an exclusion that would delete a string's or a binary's own
    /// property (`{"tags.0": 0}` over `tags: ["red"]`: JavaScript's "Cannot delete property").
    public func apply(_ document: EJSONObject) throws(SelectorError) -> EJSONObject {
        guard case .object(var out) = try transform(.object(document), rules) else { return document }
        if keepsID, let id = document["_id"] { out["_id"] = id }
        if !keepsID { out.removeValue(forKey: "_id") }
        return out
    }

    private func transform(_ value: EJSON, _ rules: [(key: String, rule: Rule)]) throws(SelectorError) -> EJSON {
        if case .array(let elements) = value {
            var out: [EJSON] = []
            out.reserveCapacity(elements.count)
            for element in elements { out.append(try transform(element, rules)) }
            return .array(out)
        }
        if value.isNull { return value }
        guard including == true else {
            // Exclusion works on objects; anything else is left as it is, but a string's or a
            // binary's own properties cannot be deleted.
            guard case .object(var out) = value else {
                for (key, rule) in rules where value.ownProperty(key) != nil {
                    if case .leaf = rule {
                        throw SelectorError(
                            "fields cannot exclude '\(key)' of a \(value.typeName) (a string's or a binary's positions are not fields)")
                    }
                }
                return value
            }
            for (key, rule) in rules {
                guard let field = out[key] else { continue }
                switch rule {
                case .leaf: out.removeValue(forKey: key)
                case .tree(let sub): if field.isObjectLike { out[key] = try transform(field, sub) }
                }
            }
            return .object(out)
        }
        var out = EJSONObject()
        for (key, rule) in rules {
            guard let field = value.ownProperty(key) else { continue }
            switch rule {
            case .leaf: out[key] = field
            case .tree(let sub): if field.isObjectLike { out[key] = try transform(field, sub) }
            }
        }
        return .object(out)
    }
}

extension EJSON {
    /// What JavaScript finds as an own property `key` of the value: an object's field, a string's
    /// UTF-16 unit at an index (and its `length`), a binary's byte at an index.
    func ownProperty(_ key: String) -> EJSON? {
        switch self {
        case .object(let object): return object[key]
        case .string(let text):
            if key == "length" { return .number(Double(text.utf16.count)) }
            guard let index = Self.arrayIndex(key), index < text.utf16.count else { return nil }
            let unit = text.utf16[text.utf16.index(text.utf16.startIndex, offsetBy: index)]
            return .string(String(decoding: [unit], as: UTF16.self))
        case .binary(let bytes):
            guard let index = Self.arrayIndex(key), index < bytes.count else { return nil }
            return .number(Double(bytes[index]))
        default:
            return nil
        }
    }

    /// A canonical array index ("0", "17"; not "017").
    static func arrayIndex(_ key: String) -> Int? {
        guard key == "0" || !key.hasPrefix("0"), key.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return Int(key)
    }
}
