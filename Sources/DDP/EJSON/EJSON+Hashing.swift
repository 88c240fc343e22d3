extension EJSON: Hashable {
    /// A hash that agrees with `==` (Meteor's `EJSON.equals`, key order ignored): `NaN` hashes
    /// alike, `0` and `-0` alike, and an object's fields are combined in any order. What lets
    /// `$in`, `$nin` and `$all` look a value up in a set, whatever its type.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let b):
            hasher.combine(1 as UInt8)
            hasher.combine(b)
        case .number(let n):
            hasher.combine(2 as UInt8)
            Self.combine(n, into: &hasher)
        case .string(let s):
            hasher.combine(3 as UInt8)
            hasher.combine(s)
        case .array(let items):
            hasher.combine(4 as UInt8)
            hasher.combine(items.count)
            for item in items { item.hash(into: &hasher) }
        case .object(let object):
            hasher.combine(5 as UInt8)
            object.hashIgnoringKeyOrder(into: &hasher)
        case .date(let t):
            hasher.combine(6 as UInt8)
            Self.combine(t, into: &hasher)
        case .binary(let bytes):
            hasher.combine(7 as UInt8)
            hasher.combine(bytes)
        case .regexp(let source, let flags):
            hasher.combine(8 as UInt8)
            hasher.combine(source)
            hasher.combine(flags)
        case .custom(let type, let value):
            hasher.combine(9 as UInt8)
            hasher.combine(type)
            value.hash(into: &hasher)
        }
    }

    /// `NaN` equals `NaN` here (and Swift's `Double` hashes `0` and `-0` alike already).
    private static func combine(_ n: Double, into hasher: inout Hasher) {
        if n.isNaN { hasher.combine(Double.nan.bitPattern) } else { hasher.combine(n) }
    }
}

extension EJSONObject: Hashable {
    public func hash(into hasher: inout Hasher) { hashIgnoringKeyOrder(into: &hasher) }

    /// Each field hashed alone and the results added: the same for any order of the same fields.
    func hashIgnoringKeyOrder(into hasher: inout Hasher) {
        var sum = 0
        for field in fields {
            var inner = Hasher()
            inner.combine(field.key)
            field.value.hash(into: &inner)
            sum &+= inner.finalize()
        }
        hasher.combine(fields.count)
        hasher.combine(sum)
    }
}
