extension Selector {
    /// The conditions on top-level fields (not `_id`) that a ``FieldIndex`` answers, each a
    /// conjunct of the whole selector: every document the selector matches matches each of
    /// them, so the candidates of any one include every match. Only targets of a kind the index
    /// keeps in order are taken (``FieldIndex/isOrdered(_:)``): `{a: null}` also matches a
    /// document without `a`, and an object or array target compares by structure.
    public var indexableConditions: [(field: String, range: IndexRange)] {
        let conjuncts: [Clause] =
            if case .and(let parts) = clause { parts } else { [clause] }
        return conjuncts.compactMap { conjunct in
            guard case .field(let path, let test) = conjunct, path.count == 1, path[0] != "_id", let range = Self.range(test) else {
                return nil
            }
            return (path[0], range)
        }
    }

    static func range(_ test: FieldTest) -> IndexRange? {
        switch test {
        case .equals(let target):
            return FieldIndex.isOrdered(target) ? .values([target]) : nil
        case .in(let set):
            let targets = Array(set.values)
            return targets.allSatisfy(FieldIndex.isOrdered) ? .values(targets) : nil
        case .compare(let op, let target):
            guard FieldIndex.isOrdered(target) else { return nil }
            switch op {
            case .gt: return .bounds(lower: .init(value: target, inclusive: false), upper: nil)
            case .gte: return .bounds(lower: .init(value: target, inclusive: true), upper: nil)
            case .lt: return .bounds(lower: nil, upper: .init(value: target, inclusive: false))
            case .lte: return .bounds(lower: nil, upper: .init(value: target, inclusive: true))
            }
        case .allOf(let tests):
            // `{$gte: 1, $lt: 5}`: one lower and one upper bound of the same type class make one
            // range; otherwise the first test the index answers (each is a conjunct).
            let ranges = tests.compactMap(range)
            var lower: IndexRange.Bound?
            var upper: IndexRange.Bound?
            for case .bounds(let l, let u) in ranges {
                if lower == nil, let l { lower = l }
                if upper == nil, let u { upper = u }
            }
            if let lower, let upper, lower.value.typeOrder == upper.value.typeOrder { return .bounds(lower: lower, upper: upper) }
            return ranges.first
        default:
            return nil
        }
    }
}
