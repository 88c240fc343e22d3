/// An EJSON value: JSON extended with Meteor's types.
///
/// Objects keep their key order (MongoDB relies on it). Equality (`==`) follows
/// Meteor's `EJSON.equals`: key order is ignored, `NaN` equals `NaN`; use
/// ``EJSON/equals(_:keyOrderSensitive:)`` to compare key order too.
public enum EJSON: Sendable {
    case null
    case bool(Bool)
    /// A JSON number. Meteor numbers are IEEE doubles; `±Infinity` and `NaN`
    /// travel as `{"$InfNaN": ±1 | 0}`.
    case number(Double)
    case string(String)
    case array([EJSON])
    case object(EJSONObject)
    /// `{"$date": milliseconds since 1970}`.
    case date(Double)
    /// `{"$binary": base64}`.
    case binary([UInt8])
    /// `{"$regexp": source, "$flags": flags}`.
    case regexp(source: String, flags: String)
    /// `{"$type": name, "$value": value}`: a custom EJSON type such as Mongo's ObjectId (`oid`).
    indirect case custom(type: String, value: EJSON)
}

extension EJSON {
    public static func int(_ value: Int) -> EJSON { .number(Double(value)) }

    public var isNull: Bool { if case .null = self { return true } else { return false } }

    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var numberValue: Double? { if case .number(let n) = self { return n } else { return nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    public var arrayValue: [EJSON]? { if case .array(let a) = self { return a } else { return nil } }
    public var objectValue: EJSONObject? { if case .object(let o) = self { return o } else { return nil } }

    /// The value as an exact integer, when it is a number without a fractional part.
    public var intValue: Int? {
        guard case .number(let n) = self, n.isFinite, n.rounded() == n, abs(n) < 9.007199254740992e15 else { return nil }
        return Int(n)
    }

    /// Member access for objects; `nil` for other values or a missing key.
    public subscript(key: String) -> EJSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// A short name of the value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        case .date: "date"
        case .binary: "binary"
        case .regexp: "regexp"
        case .custom(let type, _): "custom type '\(type)'"
        }
    }
}

extension EJSON: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: EJSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, EJSON)...) {
        self = .object(EJSONObject(elements.map { EJSONObject.Field(key: $0.0, value: $0.1) }))
    }
}

extension EJSON: Equatable {
    /// Meteor's `EJSON.equals` with key order ignored.
    public static func == (lhs: EJSON, rhs: EJSON) -> Bool {
        lhs.equals(rhs, keyOrderSensitive: false)
    }

    /// Meteor's `EJSON.equals`: `NaN` equals `NaN`, strings by code units (JavaScript's `===`),
    /// dates by time, binaries by bytes, objects by keys and values (in order when `keyOrderSensitive`).
    public func equals(_ other: EJSON, keyOrderSensitive: Bool) -> Bool {
        switch (self, other) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b || (a.isNaN && b.isNaN)
        case (.string(let a), .string(let b)): return EJSON.sameCodeUnits(a, b)
        case (.date(let a), .date(let b)): return a == b || (a.isNaN && b.isNaN)
        case (.binary(let a), .binary(let b)): return a == b
        case (.regexp(let s1, let f1), .regexp(let s2, let f2)): return s1 == s2 && f1 == f2
        case (.custom(let t1, let v1), .custom(let t2, let v2)):
            return t1 == t2 && v1.equals(v2, keyOrderSensitive: keyOrderSensitive)
        case (.array(let a), .array(let b)):
            guard a.count == b.count else { return false }
            for i in a.indices where !a[i].equals(b[i], keyOrderSensitive: keyOrderSensitive) { return false }
            return true
        case (.object(let a), .object(let b)):
            return a.equals(b, keyOrderSensitive: keyOrderSensitive)
        default:
            return false
        }
    }
}

extension EJSON: CustomStringConvertible {
    /// The compact EJSON text of the value.
    public var description: String { String(decoding: EJSONWriter.encode(self), as: UTF8.self) }
}

extension EJSON {
    /// The same value with every object's keys in one order (by their UTF-8 bytes), recursively:
    /// values that differ only in key order become one, so they share one key and one encoding.
    public var keysSorted: EJSON {
        switch self {
        case .array(let items): return .array(items.map(\.keysSorted))
        case .object(let object):
            let fields = object.fields.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            return .object(EJSONObject(uniqueFieldsInOrder: fields.map { EJSONObject.Field(key: $0.key, value: $0.value.keysSorted) }))
        case .custom(let type, let value): return .custom(type: type, value: value.keysSorted)
        case .null, .bool, .number, .string, .date, .binary, .regexp: return self
        }
    }
}

extension EJSON {
    /// An estimate of the memory the value takes (its payload and a little bookkeeping), for
    /// memory budgets; not exact, the same for the same value.
    public var estimatedBytes: Int {
        switch self {
        case .null, .bool, .number, .date: return 8
        case .string(let text): return 16 + text.utf8.count
        case .binary(let bytes): return 16 + bytes.count
        case .regexp(let source, let flags): return 32 + source.utf8.count + flags.utf8.count
        case .array(let items): return items.reduce(16) { $0 + 8 + $1.estimatedBytes }
        case .object(let object): return object.fields.reduce(16) { $0 + 48 + $1.key.utf8.count + $1.value.estimatedBytes }
        case .custom(let type, let value): return 16 + type.utf8.count + value.estimatedBytes
        }
    }
}
