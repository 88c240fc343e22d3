/// A sort specification, ordering documents as Minimongo's `Sorter` does (`minimongo/sorter.js`):
/// a document sorts by the smallest key its values give (the largest, for a descending part),
/// where a path reaching an array gives a key per element, and two parts reaching arrays must
/// reach the same positions; a missing value comes before `null`; ties keep the documents' order.
public struct SortSpec: Sendable, Equatable {
    public struct Part: Sendable, Equatable {
        public let path: FieldPath
        public let ascending: Bool
    }

    public let parts: [Part]

    public var isEmpty: Bool { parts.isEmpty }

    /// `{"field": 1 | -1, …}` in the order written (a JavaScript object would put keys that look
    /// like array indexes first; MongoDB keeps the order written, and so does the bridge);
    /// `[["field", "asc" | "desc" | 1 | -1], "field", …]`.
    /// In the object form a number sorts ascending from 0 up, as in Minimongo, and
    /// `"asc"`/`"desc"` (or `"ascending"`/`"descending"`) mean what they say, as MongoDB's drivers
    /// take them (Minimongo sorts both descending); in the array form -1 means descending, as in
    /// MongoDB's drivers (Minimongo takes only `"desc"`).
    public init(_ value: EJSON) throws(SelectorError) {
        var parts: [Part] = []
        func add(_ key: String, _ ascending: Bool) throws(SelectorError) {
            guard !key.isEmpty else { throw SelectorError("sort keys must not be empty") }
            guard !key.hasPrefix("$") else { throw SelectorError("unsupported sort key \(key)") }
            parts.append(Part(path: FieldPath(key), ascending: ascending))
        }
        switch value {
        case .object(let object):
            for field in object.fields { try add(field.key, try Self.direction(field.value)) }
        case .array(let items):
            for item in items {
                switch item {
                case .string(let key): try add(key, true)
                case .array(let pair) where (1...2).contains(pair.count):
                    guard case .string(let key) = pair[0] else { throw SelectorError("a sort entry's field must be a string") }
                    try add(key, pair.count == 1 ? true : try Self.direction(pair[1]))
                default: throw SelectorError("sort entries must be \"field\" or [\"field\", \"asc\"|\"desc\"]")
                }
            }
        default:
            throw SelectorError("a sort must be an object like {\"field\": 1} or an array like [[\"field\", \"desc\"]]")
        }
        self.parts = parts
    }

    private static func direction(_ value: EJSON) throws(SelectorError) -> Bool {
        switch value {
        case .string("asc"), .string("ascending"): return true
        case .string("desc"), .string("descending"): return false
        case .number(let n) where !n.isNaN: return n >= 0
        case .bool, .null: return true
        default: throw SelectorError("a sort direction must be 1, -1, \"asc\" or \"desc\", not \(value)")
        }
    }

    // MARK: - Keys

    /// The key `document` sorts by (`Sorter._getMinKeyFromDoc`): one value per part (`nil`:
    /// missing), the smallest under the spec of the keys its values give. Throws where Minimongo
    /// does: two parts reaching arrays at different positions ("parallel arrays").
    public func key(of document: EJSON) throws(SelectorError) -> [EJSON?] {
        /// A part's values: one for a path through no array, else one per array position.
        enum Values {
            case sole(EJSON?)
            case byPosition([[Int]: EJSON?])
        }
        var known: (order: [[Int]], set: Set<[Int]>)?
        var values: [Values] = []
        values.reserveCapacity(parts.count)
        for part in parts {
            var branches = Self.expand(part.path.sortBranches(in: document))
            if branches.isEmpty { branches = [FieldPath.Branch(value: nil)] }
            var sole: EJSON??
            var byPosition: [[Int]: EJSON?] = [:]
            var order: [[Int]] = []
            for branch in branches {
                guard let indices = branch.indices else {
                    guard branches.count == 1 else { throw SelectorError("cannot sort: several values but no array") }
                    sole = .some(branch.value)
                    continue
                }
                guard byPosition.updateValue(branch.value, forKey: indices) == nil else {
                    throw SelectorError("cannot sort by \(part.path): it reaches one position twice")
                }
                order.append(indices)
                if let known, !known.set.contains(indices) {
                    throw SelectorError("cannot sort by parallel arrays (\(parts.map(\.path.description).joined(separator: ", ")))")
                }
            }
            if let known {
                if sole == nil, known.order.count != byPosition.count {
                    throw SelectorError("cannot sort by parallel arrays (\(parts.map(\.path.description).joined(separator: ", ")))")
                }
            } else if !order.isEmpty {
                known = (order, Set(order))
            }
            values.append(sole.map { .sole($0) } ?? .byPosition(byPosition))
        }
        guard let known else {
            return values.map { if case .sole(let value) = $0 { value } else { nil } }
        }
        var smallest: [EJSON?]?
        for position in known.order {
            let key: [EJSON?] = values.map {
                switch $0 {
                case .sole(let value): value
                case .byPosition(let map): map[position] ?? nil
                }
            }
            if let current = smallest {
                if try compare(key, current) == .less { smallest = key }
            } else {
                smallest = key
            }
        }
        return smallest ?? []
    }

    /// `expandArraysInBranches(…, true)`: an array's elements instead of the array, unless it
    /// was found by an explicit index.
    private static func expand(_ branches: [FieldPath.Branch]) -> [FieldPath.Branch] {
        var out: [FieldPath.Branch] = []
        out.reserveCapacity(branches.count)
        for branch in branches {
            guard case .array(let elements)? = branch.value, !branch.dontIterate else {
                out.append(FieldPath.Branch(value: branch.value, indices: branch.indices))
                continue
            }
            for (i, element) in elements.enumerated() {
                out.append(FieldPath.Branch(value: element, indices: (branch.indices ?? []) + [i]))
            }
        }
        return out
    }

    /// Two keys under the spec, part by part; the first part that is not equal decides (one
    /// that compares as NaN, `Infinity` against `Infinity`, ends the comparison unordered).
    public func compare(_ a: [EJSON?], _ b: [EJSON?]) throws(SelectorError) -> MinimongoOrder {
        for (i, part) in parts.enumerated() where i < a.count && i < b.count {
            let order = EJSON.minimongoCompare(a[i], b[i])
            if order == .unsupported { throw SelectorError("cannot sort by \(part.path): regular expressions have no order") }
            if order != .equal { return part.ascending ? order : order.inverted }
        }
        return .equal
    }
}
