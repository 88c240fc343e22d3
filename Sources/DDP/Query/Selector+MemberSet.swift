extension Selector {
    /// The values of `$in` and `$nin`. Numbers, strings and booleans sit in a hashed set (``EJSON``'s
    /// hash agrees with its `==`, which is Minimongo's equality for them): 10,000 of them cost one
    /// lookup per value, not 10,000 comparisons. Other values (objects, arrays, dates, binaries,
    /// ObjectIds, whose equality has Minimongo's own rules) are compared one by one.
    struct MemberSet: Sendable, Equatable {
        let scalars: Set<EJSON>
        let others: [EJSON]
        let containsNull: Bool
        /// How many values were given (a measure of the operator's size).
        let count: Int

        init(_ values: [EJSON]) {
            var scalars: Set<EJSON> = []
            var others: [EJSON] = []
            var containsNull = false
            for value in values {
                switch value {
                case .null: containsNull = true
                case .number, .string, .bool: scalars.insert(value)
                default: others.append(value)
                }
            }
            self.scalars = scalars
            self.others = others
            self.containsNull = containsNull
            self.count = values.count
        }

        /// The values compared one by one for each value tested.
        var linearCount: Int { others.count }

        /// Whether `value` (missing counts as `null`) equals one of the values.
        func contains(_ value: EJSON?) -> Bool {
            guard let value, !value.isNull else { return containsNull }
            switch value {
            case .number, .string, .bool: return scalars.contains(value)
            default: return others.contains { EJSON.minimongoEquals($0, value) }
            }
        }
    }
}
