/// How two values compare in Minimongo's order (`LocalCollection._f._cmp`): `unordered` is the
/// answer of a subtraction that gives NaN (`Infinity - Infinity`), which satisfies none of `<`,
/// `<=`, `==`, `>=`, `>`; `unsupported` is a comparison Minimongo refuses (two regular expressions).
public enum MinimongoOrder: Sendable, Equatable {
    case less, equal, greater, unordered, unsupported

    /// The same comparison with its sides swapped (a descending sort key).
    var inverted: MinimongoOrder {
        switch self {
        case .less: .greater
        case .greater: .less
        case .equal, .unordered, .unsupported: self
        }
    }

    static func of(_ difference: Double) -> MinimongoOrder {
        difference < 0 ? .less : difference > 0 ? .greater : difference == 0 ? .equal : .unordered
    }
}

extension EJSON {
    /// Minimongo's type code (`LocalCollection._f._type`): 1 number, 2 string, 3 object, 4 array,
    /// 5 binary, 7 ObjectId, 8 boolean, 9 date, 10 null, 11 regular expression; a custom type
    /// other than an ObjectId is an object to it.
    public var minimongoType: Int {
        switch self {
        case .number: 1
        case .string: 2
        case .object: 3
        case .array: 4
        case .binary: 5
        case .custom(type: "oid", _): 7
        case .custom: 3
        case .bool: 8
        case .date: 9
        case .null: 10
        case .regexp: 11
        }
    }

    /// The rank of the value's type in Minimongo's (and MongoDB's) order: null < numbers <
    /// strings < objects < arrays < binary < ObjectId < booleans < dates < regular expressions.
    /// A missing value comes before all of them.
    public var typeOrder: Int {
        switch self {
        case .null: 0
        case .number: 1
        case .string: 2
        case .custom(type: "oid", _): 6
        case .object, .custom: 3
        case .array: 4
        case .binary: 5
        case .bool: 7
        case .date: 8
        case .regexp: 9
        }
    }

    /// Minimongo's comparison (`LocalCollection._f._cmp`), `nil` standing for a missing value
    /// (before everything): by type rank, then by value. Strings compare by UTF-16 code units, as
    /// JavaScript's `<` does; objects as their `[key, value, key, value, …]` lists, so key order
    /// counts; binaries by length first.
    public static func minimongoCompare(_ a: EJSON?, _ b: EJSON?) -> MinimongoOrder {
        guard let a else { return b == nil ? .equal : .less }
        guard let b else { return .greater }
        let (ta, tb) = (a.typeOrder, b.typeOrder)
        if ta != tb { return ta < tb ? .less : .greater }
        switch (a, b) {
        case (.number(let x), .number(let y)): return .of(x - y)
        case (.date(let x), .date(let y)): return .of((x.isNaN ? 0 : x) - (y.isNaN ? 0 : y))
        case (.string(let x), .string(let y)): return utf16Order(x, y)
        case (.custom(type: "oid", let x), .custom(type: "oid", let y)):
            return utf16Order(x.stringValue?.lowercased() ?? "", y.stringValue?.lowercased() ?? "")
        case (.bool(let x), .bool(let y)): return x == y ? .equal : (x ? .greater : .less)
        case (.null, .null): return .equal
        case (.regexp, .regexp): return .unsupported
        case (.array(let x), .array(let y)):
            for (u, v) in zip(x, y) {
                let c = minimongoCompare(u, v)
                if c != .equal { return c }
            }
            return x.count < y.count ? .less : x.count > y.count ? .greater : .equal
        case (.binary(let x), .binary(let y)):
            if x.count != y.count { return x.count < y.count ? .less : .greater }
            for (u, v) in zip(x, y) where u != v { return u < v ? .less : .greater }
            return .equal
        default:
            // Objects (and custom types, which Minimongo takes for objects): key, value, key, value…
            let x = a.comparableFields
            let y = b.comparableFields
            for (u, v) in zip(x, y) {
                let keys = utf16Order(u.key, v.key)
                if keys != .equal { return keys }
                let values = minimongoCompare(u.value, v.value)
                if values != .equal { return values }
            }
            return x.count < y.count ? .less : x.count > y.count ? .greater : .equal
        }
    }

    /// An object's fields in order, for comparing; a custom type's value as its one field.
    private var comparableFields: [EJSONObject.Field] {
        switch self {
        case .object(let object): object.fields
        case .custom(let type, let value): [.init(key: "$type", value: .string(type)), .init(key: "$value", value: value)]
        default: []
        }
    }

    /// A total order of values (Minimongo's where it is one): what an index keeps its values in and
    /// what the in-process server's `$min`/`$max` use. NaN and `±Infinity` minus itself compare
    /// equal here; regular expressions by source and flags.
    public static func compare(_ a: EJSON, _ b: EJSON) -> Int {
        switch minimongoCompare(a, b) {
        case .less: return -1
        case .greater: return 1
        case .equal, .unordered: return 0
        case .unsupported:
            guard case .regexp(let s1, let f1) = a, case .regexp(let s2, let f2) = b else { return 0 }
            let sources = utf16Order(s1, s2)
            if sources != .equal { return sources == .less ? -1 : 1 }
            let flags = utf16Order(f1, f2)
            return flags == .less ? -1 : flags == .greater ? 1 : 0
        }
    }

    /// JavaScript's order of two strings: by UTF-16 code units. It is the order of their scalars
    /// except that a character past U+FFFF (two surrogates, from U+D800) comes before the BMP
    /// characters from U+E000. Compared on the UTF-8 bytes up to the first difference.
    static func utf16Order(_ a: String, _ b: String) -> MinimongoOrder {
        var x = a
        var y = b
        return x.withUTF8 { u in
            y.withUTF8 { v in
                let n = min(u.count, v.count)
                var i = 0
                while i < n, u[i] == v[i] { i += 1 }
                if i == n { return u.count < v.count ? .less : u.count > v.count ? .greater : .equal }
                // Back to the start of the scalar that differs (the bytes before it are equal).
                var start = i
                while start > 0, u[start] & 0xC0 == 0x80 { start -= 1 }
                let p = utf16Rank(scalar(u, at: start))
                let q = utf16Rank(scalar(v, at: start))
                return p < q ? .less : p > q ? .greater : .equal
            }
        }
    }

    /// Where a scalar's first UTF-16 code unit puts it: U+E000…U+FFFF after every surrogate pair.
    private static func utf16Rank(_ scalar: UInt32) -> UInt32 {
        (0xE000...0xFFFF).contains(scalar) ? scalar + 0x20_0000 : scalar
    }

    /// The scalar whose UTF-8 encoding starts at `i` (valid UTF-8: a Swift string's bytes).
    private static func scalar(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> UInt32 {
        let lead = UInt32(bytes[i])
        func next(_ k: Int) -> UInt32 { i + k < bytes.count ? UInt32(bytes[i + k] & 0x3F) : 0 }
        switch lead {
        case 0..<0x80: return lead
        case 0xC0..<0xE0: return (lead & 0x1F) << 6 | next(1)
        case 0xE0..<0xF0: return (lead & 0x0F) << 12 | next(1) << 6 | next(2)
        default: return (lead & 0x07) << 18 | next(1) << 12 | next(2) << 6 | next(3)
        }
    }

    /// Whether two strings hold the same code units (JavaScript's `===`; Swift's `==` also takes
    /// canonically equivalent strings, "A\u{30A}" and "Å", for equal).
    @inline(__always)
    public static func sameCodeUnits(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.utf8.elementsEqual(b.utf8)
    }
}
