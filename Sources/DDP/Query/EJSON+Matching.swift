extension EJSON {
    /// Minimongo's equality of a selector's value with a document's (`LocalCollection._f._equal`:
    /// Meteor's `EJSON.equals` with key order counting). Strings by code units, `NaN` equals
    /// `NaN`, dates by time, binaries by bytes, ObjectIds by their hex digits, arrays element by
    /// element; and, as `EJSON.equals` falls back to comparing own keys, an object equals a date,
    /// a regular expression or a binary when both have the same keys (a date and a regular
    /// expression have none; a binary's keys are its positions).
    public static func minimongoEquals(_ a: EJSON, _ b: EJSON) -> Bool {
        switch (a, b) {
        case (.number(let x), .number(let y)): return x == y || (x.isNaN && y.isNaN)
        case (.string(let x), .string(let y)): return sameCodeUnits(x, y)
        case (.bool(let x), .bool(let y)): return x == y
        case (.null, .null): return true
        case (.date(let x), .date(let y)): return x == y
        case (.binary(let x), .binary(let y)): return x == y
        case (.custom(type: "oid", let x), .custom(type: "oid", let y)):
            return sameCodeUnits(x.stringValue?.lowercased() ?? "", y.stringValue?.lowercased() ?? "")
        case (.custom(type: "oid", _), _), (_, .custom(type: "oid", _)): return false
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { minimongoEquals($0, $1) }
        case (.array, _), (_, .array): return false
        case (.custom(let t1, let v1), .custom(let t2, let v2)): return t1 == t2 && v1 == v2
        case (.custom, _), (_, .custom): return false
        default:
            guard let x = a.ownKeys, let y = b.ownKeys, x.count == y.count else { return false }
            for (u, v) in zip(x, y) where !sameCodeUnits(u.key, v.key) || !minimongoEquals(u.value, v.value) { return false }
            return true
        }
    }

    /// The own enumerable keys JavaScript sees on an object-like value, in order; `nil` for a
    /// primitive (which equals only an identical primitive).
    private var ownKeys: [EJSONObject.Field]? {
        switch self {
        case .object(let object): object.fields
        case .date, .regexp: []
        case .binary(let bytes): bytes.enumerated().map { EJSONObject.Field(key: String($0.offset), value: .number(Double($0.element))) }
        default: nil
        }
    }
}
