extension EJSON {
    /// MongoDB's order of type classes: null < numbers < strings < objects < arrays < binary
    /// < ObjectId < booleans < dates < regular expressions.
    var typeOrder: Int {
        switch self {
        case .null: 1
        case .number: 2
        case .string: 3
        case .object: 4
        case .array: 5
        case .binary: 6
        case .custom(type: "oid", _): 7
        case .custom: 4
        case .bool: 8
        case .date: 9
        case .regexp: 11
        }
    }

    /// MongoDB's comparison of two values: by type class first, then by value.
    public static func compare(_ a: EJSON, _ b: EJSON) -> Int {
        let ta = a.typeOrder
        let tb = b.typeOrder
        if ta != tb { return ta < tb ? -1 : 1 }
        switch (a, b) {
        case (.number(let x), .number(let y)), (.date(let x), .date(let y)):
            return x < y ? -1 : x > y ? 1 : 0
        case (.string(let x), .string(let y)):
            return x < y ? -1 : x > y ? 1 : 0
        case (.bool(let x), .bool(let y)):
            return x == y ? 0 : (!x ? -1 : 1)
        case (.array(let x), .array(let y)):
            for (u, v) in zip(x, y) {
                let c = compare(u, v)
                if c != 0 { return c }
            }
            return x.count < y.count ? -1 : x.count > y.count ? 1 : 0
        case (.object(let x), .object(let y)):
            for (u, v) in zip(x.fields, y.fields) {
                if u.key != v.key { return u.key < v.key ? -1 : 1 }
                let c = compare(u.value, v.value)
                if c != 0 { return c }
            }
            return x.count < y.count ? -1 : x.count > y.count ? 1 : 0
        case (.binary(let x), .binary(let y)):
            if x.count != y.count { return x.count < y.count ? -1 : 1 }
            for (u, v) in zip(x, y) where u != v { return u < v ? -1 : 1 }
            return 0
        case (.custom(_, let x), .custom(_, let y)):
            return compare(x, y)
        case (.regexp(let s1, let f1), .regexp(let s2, let f2)):
            return (s1, f1) < (s2, f2) ? -1 : (s1, f1) == (s2, f2) ? 0 : 1
        default:
            return 0
        }
    }
}
