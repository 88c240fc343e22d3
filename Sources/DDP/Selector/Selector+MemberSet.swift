extension Selector {
    /// The targets of `$in` and `$nin`, in a hashed set whatever their EJSON type (``EJSON``'s
    /// hash agrees with its `==`): 10,000 targets cost one lookup per value, not 10,000 comparisons.
    struct MemberSet: Sendable, Equatable {
        let values: Set<EJSON>
        /// How many targets were given (a measure of the operator's size).
        let count: Int

        init(_ values: [EJSON]) {
            self.values = Set(values)
            self.count = values.count
        }

        var containsNull: Bool { values.contains(.null) }

        func contains(_ value: EJSON) -> Bool { values.contains(value) }
    }
}
