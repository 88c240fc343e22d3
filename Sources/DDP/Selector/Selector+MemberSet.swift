extension Selector {
    /// The targets of `$in`: strings in a hashed set, other values compared one by one.
    struct MemberSet: Sendable, Equatable {
        let strings: Set<String>
        let others: [EJSON]

        init(_ values: [EJSON]) {
            var strings = Set<String>()
            var others: [EJSON] = []
            for value in values {
                if case .string(let text) = value { strings.insert(text) } else { others.append(value) }
            }
            self.strings = strings
            self.others = others
        }

        var containsNull: Bool { others.contains { $0.isNull } }

        func contains(_ value: EJSON) -> Bool {
            if case .string(let text) = value { return strings.contains(text) }
            return others.contains { $0 == value }
        }
    }
}
