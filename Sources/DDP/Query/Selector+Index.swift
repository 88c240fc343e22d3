extension Selector {
    /// The conditions on top-level fields (not `_id`) that a ``FieldIndex`` answers, each a
    /// conjunct of the whole selector: every document the selector matches matches each of
    /// them, so the candidates of any one include every match. Only targets of a kind the index
    /// keeps in order are taken (``FieldIndex/isOrdered(_:)``): `{a: null}` also matches a
    /// document without `a`, and an object or array target compares by structure. Operators on
    /// one field are separate conditions, not one range: `{a: {$gte: 5, $lte: -1}}` matches
    /// `a: [1000000, -1]`, each on another element.
    public var indexableConditions: [(field: String, range: IndexRange)] {
        let conjuncts: [Clause] =
            if case .and(let parts) = clause { parts } else { [clause] }
        return conjuncts.flatMap { conjunct -> [(field: String, range: IndexRange)] in
            guard case .field(let path, let test) = conjunct, path.parts.count == 1, path.parts[0] != "_id" else { return [] }
            return Self.ranges(test).map { (path.parts[0], $0) }
        }
    }

    static func ranges(_ test: ValueTest) -> [IndexRange] {
        switch test {
        case .all(let tests): return tests.flatMap(ranges)
        case .element(let element, .expand):
            switch element {
            case .equals(let target):
                return FieldIndex.isOrdered(target) ? [.values([target])] : []
            case .in(let set):
                guard !set.containsNull, set.others.isEmpty, set.scalars.allSatisfy(FieldIndex.isOrdered) else { return [] }
                return [.values(Array(set.scalars))]
            case .compare(let op, let target):
                guard FieldIndex.isOrdered(target) else { return [] }
                switch op {
                case .gt: return [.bounds(lower: .init(value: target, inclusive: false), upper: nil)]
                case .gte: return [.bounds(lower: .init(value: target, inclusive: true), upper: nil)]
                case .lt: return [.bounds(lower: nil, upper: .init(value: target, inclusive: false))]
                case .lte: return [.bounds(lower: nil, upper: .init(value: target, inclusive: true))]
                }
            default:
                return []
            }
        default:
            return []
        }
    }
}
