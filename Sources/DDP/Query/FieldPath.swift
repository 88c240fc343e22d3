/// A dotted path of a selector or a sort (`a.b.0.c`), and the values it reaches in a document as
/// Minimongo's lookup finds them (`makeLookupFunction` in Meteor's `minimongo/common.js`): through
/// objects by key, into an array by a numeric part, and across an array of objects by looking the
/// rest of the path up in each element that is an object.
public struct FieldPath: Sendable, Equatable, CustomStringConvertible {
    /// The parts between the dots (empty parts are keys too, as in JavaScript).
    public let parts: [String]
    /// For each part: its value when it is all digits (`nil` otherwise, or past `Int`), and whether
    /// it is a canonical array index ("7", not "07": JavaScript finds no element at "07").
    let indexes: [(value: Int?, numeric: Bool, canonical: Bool)]

    public init(_ key: String) {
        parts = key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        indexes = parts.map { part in
            let numeric = !part.isEmpty && part.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            let value = numeric ? Int(part) : nil
            return (value, numeric, numeric && (part == "0" || !part.hasPrefix("0")))
        }
    }

    public var description: String { parts.joined(separator: ".") }

    public static func == (a: FieldPath, b: FieldPath) -> Bool { a.parts == b.parts }

    /// One value a path reaches: `nil` for a missing one (JavaScript's `undefined`); `dontIterate`
    /// when it is an array found by an explicit index (`{'a.0': 5}` does not look inside `a[0]`);
    /// `indices`, when tracked, the array positions taken on the way (an explicit index followed by
    /// -1), which a sort needs to tell apart the keys of one document.
    struct Branch {
        var value: EJSON?
        var dontIterate = false
        var indices: [Int]? = nil
    }

    /// What a path reaches in a document: most paths pass through objects only and reach one value.
    enum Branches {
        case one(EJSON?, dontIterate: Bool)
        case many([Branch])

        var count: Int {
            switch self {
            case .one: 1
            case .many(let list): list.count
            }
        }
    }

    /// The values the path reaches from `root` (an object, or an array inside `$elemMatch`).
    func branches(in root: EJSON) -> Branches {
        // Through objects only: one value, or a missing one (a custom type has no fields to reach).
        if case .object(var object) = root {
            var i = 0
            while true {
                let value = object[parts[i]]
                if i == parts.count - 1 { return .one(value, dontIterate: false) }
                switch value {
                case .object(let inner)?:
                    object = inner
                    i += 1
                case .array?:
                    var out: [Branch] = []
                    collect(root, 0, indices: nil, forSort: false, into: &out)
                    return .many(out)
                default:
                    return .one(nil, dontIterate: false)
                }
            }
        }
        var out: [Branch] = []
        collect(root, 0, indices: nil, forSort: false, into: &out)
        return .many(out)
    }

    /// The values the path reaches from `root`, by the general lookup alone (what the shortcut of
    /// ``branches(in:)`` must agree with).
    func lookUp(in root: EJSON) -> [Branch] {
        var out: [Branch] = []
        collect(root, 0, indices: nil, forSort: false, into: &out)
        return out
    }

    /// The values the path reaches for a sort key, with their array positions; a numeric part
    /// after an array means only that element, not that index inside each element.
    func sortBranches(in root: EJSON) -> [Branch] {
        var out: [Branch] = []
        collect(root, 0, indices: [], forSort: true, into: &out)
        return out
    }

    /// Minimongo's lookup of `parts[i...]` in `doc` (an object or an array). `indices` is `nil`
    /// when positions are not tracked; an empty list stands for none taken yet.
    private func collect(_ doc: EJSON, _ i: Int, indices: [Int]?, forSort: Bool, into out: inout [Branch]) {
        var indices = indices
        let firstLevel: EJSON?
        var docIsArray = false
        switch doc {
        case .array(let elements):
            // Only a numeric part reaches into an array, and only within it; else no value at all.
            guard indexes[i].numeric, let index = indexes[i].value, index < elements.count else { return }
            firstLevel = indexes[i].canonical ? elements[index] : nil
            docIsArray = true
            if indices != nil { indices! += [index, -1] }
        case .object(let object):
            firstLevel = object[parts[i]]
        default:
            firstLevel = nil
        }
        let tracked = indices.flatMap { $0.isEmpty ? nil : $0 }
        if i == parts.count - 1 {
            var dontIterate = false
            if docIsArray, case .array? = firstLevel { dontIterate = true }
            out.append(Branch(value: firstLevel, dontIterate: dontIterate, indices: tracked))
            return
        }
        guard let next = firstLevel, next.isIndexable else {
            // Nothing deeper: a missing value, except after an explicit index (Mongo 2.5 on).
            if !docIsArray { out.append(Branch(value: nil, indices: tracked)) }
            return
        }
        collect(next, i + 1, indices: indices, forSort: forSort, into: &out)
        // Across an array: the rest of the path in each element that is an object too, except
        // that a sort's numeric part means that index only.
        if case .array(let elements) = next, !(forSort && indexes[i + 1].numeric) {
            for (position, element) in elements.enumerated() where element.isPlainObject {
                collect(element, i + 1, indices: indices.map { $0 + [position] }, forSort: forSort, into: &out)
            }
        }
    }
}

extension EJSON {
    /// Minimongo's plain object (`_isPlainObject`): an object, or a custom type other than an ObjectId.
    var isPlainObject: Bool {
        switch self {
        case .object: true
        case .custom(let type, _): type != "oid"
        default: false
        }
    }

    /// What a path can look into (`isIndexable`): an array or a plain object.
    var isIndexable: Bool {
        if case .array = self { return true }
        return isPlainObject
    }

    /// JavaScript's `x === Object(x)`: anything but null, numbers, strings and booleans.
    var isObjectLike: Bool {
        switch self {
        case .null, .number, .string, .bool: false
        default: true
        }
    }

    /// JavaScript's truthiness: `false`, `0`, `NaN`, `""` and `null` are false.
    public var isTruthy: Bool {
        switch self {
        case .null: false
        case .bool(let b): b
        case .number(let n): n != 0 && !n.isNaN
        case .string(let s): !s.isEmpty
        default: true
        }
    }
}
