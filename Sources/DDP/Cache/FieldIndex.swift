#if canImport(HashTreeCollections)
    import HashTreeCollections
#endif

/// An index of one top-level field of a collection: each document's value of the field (each
/// element, for an array: Mongo's conditions match an array by any of its elements) with the
/// document's id, in the EJSON order (``EJSON/compare(_:_:)``). An equality or range condition
/// on the field finds its candidates by binary search instead of a scan of every document.
///
/// The index only narrows: a query still evaluates its whole selector on the candidates (the
/// general evaluation stays the reference), so the candidates only need to include every
/// document the condition can match. Only values with a total order are kept in order
/// (numbers but NaN, strings, booleans, dates); a document whose value is of another kind
/// (null, an object, a nested array, binary, NaN…) is a candidate of every condition. Built on first use (``DocumentCache/Collection/index(_:at:)``),
/// kept by the collection's changes, dropped when unused (``DocumentCache/Collection/dropIndexes(unusedSince:)``).
public struct FieldIndex: Sendable {
    struct Entry: Sendable {
        let value: EJSON
        let id: String
    }

    public let field: String
    /// Sorted by value (EJSON order), then id.
    private(set) var entries: [Entry] = []
    /// Documents whose value (or an element of it) has no place in the order: always candidates.
    private(set) var unordered: Set<String> = []
    /// When a query last used it (an instant the owner passes in).
    var lastUsed: ContinuousClock.Instant

    init(field: String, documents: DocumentMap, at now: ContinuousClock.Instant) {
        self.field = field
        self.lastUsed = now
        var entries: [Entry] = []
        entries.reserveCapacity(documents.count)
        for (id, document) in documents {
            let (ordered, hasUnordered) = Self.keys(document[field])
            for value in ordered { entries.append(Entry(value: value, id: id)) }
            if hasUnordered { unordered.insert(id) }
        }
        entries.sort(by: Self.precedes)
        self.entries = entries
    }

    public var count: Int { entries.count }

    /// The values a document is found by: none when the field is missing, each element of an
    /// array (and not the array itself: a condition with an array target is not indexed); and
    /// whether any is of a kind kept out of the order.
    static func keys(_ value: EJSON?) -> (ordered: [EJSON], hasUnordered: Bool) {
        switch value {
        case nil: return ([], false)
        case .array(let elements)?:
            let ordered = elements.filter(isOrdered)
            return (ordered, ordered.count != elements.count)
        case let value?: return isOrdered(value) ? ([value], false) : ([], true)
        }
    }

    /// A kind whose EJSON order is total and agrees with `==`: what may be kept in order.
    public static func isOrdered(_ value: EJSON) -> Bool {
        switch value {
        case .number(let n), .date(let n): !n.isNaN
        case .string, .bool: true
        default: false
        }
    }

    static func precedes(_ a: Entry, _ b: Entry) -> Bool {
        let c = EJSON.compare(a.value, b.value)
        return c != 0 ? c < 0 : a.id < b.id
    }

    /// A document's field changed from `old` to `new` (either `nil`: absent).
    mutating func update(id: String, old: EJSON?, new: EJSON?) {
        let (oldKeys, oldUnordered) = Self.keys(old)
        let (newKeys, newUnordered) = Self.keys(new)
        if oldUnordered { unordered.remove(id) }
        if newUnordered { unordered.insert(id) }
        for value in oldKeys {
            let entry = Entry(value: value, id: id)
            let position = lowerBound(entry)
            if position < entries.count, entries[position].id == id, EJSON.compare(entries[position].value, value) == 0 {
                entries.remove(at: position)
            }
        }
        for value in newKeys {
            let entry = Entry(value: value, id: id)
            entries.insert(entry, at: lowerBound(entry))
        }
    }

    private func lowerBound(_ entry: Entry) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if Self.precedes(entries[middle], entry) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The first position whose value is not before `value` (`orEqual: false`: not before or equal).
    private func boundary(_ value: EJSON, after orEqual: Bool) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            let c = EJSON.compare(entries[middle].value, value)
            if c < 0 || (orEqual && c == 0) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The ids of the documents with a value in `range` (each once).
    public func candidates(_ range: IndexRange) -> Set<String> {
        var ids = unordered
        switch range {
        case .values(let values):
            for value in values {
                let start = boundary(value, after: false)
                let end = boundary(value, after: true)
                for entry in entries[start..<end] { ids.insert(entry.id) }
            }
        case .bounds(let lower, let upper):
            // Mongo's ranges compare within one type class: the bounds' class limits the span.
            let classValue = lower?.value ?? upper?.value
            var start = lower.map { boundary($0.value, after: !$0.inclusive) } ?? 0
            var end = upper.map { boundary($0.value, after: $0.inclusive) } ?? entries.count
            if let classValue {
                let order = classValue.typeOrder
                if lower == nil { start = firstPosition { $0.typeOrder >= order } }
                if upper == nil { end = firstPosition { $0.typeOrder > order } }
            }
            guard start < end else { return ids }
            for entry in entries[start..<end] where entry.value.typeOrder == classValue?.typeOrder { ids.insert(entry.id) }
        }
        return ids
    }

    /// The first position whose value satisfies `condition` (which must hold for a suffix).
    private func firstPosition(_ condition: (EJSON) -> Bool) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if condition(entries[middle].value) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

/// What a condition on an indexed field asks for.
public enum IndexRange: Sendable, Equatable {
    /// Equal to one of these (`$eq`, a plain value, `$in`).
    case values([EJSON])
    /// Between bounds of one type class (`$gt`, `$gte`, `$lt`, `$lte`, together or alone).
    case bounds(lower: Bound?, upper: Bound?)

    public struct Bound: Sendable, Equatable {
        public let value: EJSON
        public let inclusive: Bool

        public init(value: EJSON, inclusive: Bool) {
            self.value = value
            self.inclusive = inclusive
        }
    }
}

extension DocumentCache {
    /// How long an index no query uses is kept up.
    public static let indexIdleLimit: Duration = .seconds(300)

    /// One collection, with an index of each of `fields` (built now when missing), for a query
    /// to run on outside the cache's owner; indexes unused for ``indexIdleLimit`` are dropped.
    public mutating func indexed(_ collection: String, fields: [String], at now: ContinuousClock.Instant) -> Collection? {
        guard collections[collection] != nil else { return nil }
        collections[collection]!.dropIndexes(unusedSince: now - Self.indexIdleLimit)
        for field in fields { _ = collections[collection]!.index(field, at: now) }
        return collections[collection]
    }
}

extension DocumentCache.Collection {
    /// The ids an index can narrow `selector` to (the smallest set among its indexed
    /// conditions), or `nil` when no condition has an index here: scan every document.
    public func candidates(for selector: Selector) -> Set<String>? {
        var best: Set<String>?
        for (field, range) in selector.indexableConditions {
            guard let index = indexes[field] else { continue }
            let ids = index.candidates(range)
            if best == nil || ids.count < best!.count { best = ids }
        }
        return best
    }

    /// The most indexes a collection keeps; past it, the least recently used goes.
    public static let maxIndexes = 4

    /// The index of `field`, built now when there is none; marked used at `now`.
    public mutating func index(_ field: String, at now: ContinuousClock.Instant) -> FieldIndex {
        if var index = indexes[field] {
            index.lastUsed = now
            indexes[field] = index
            return index
        }
        if indexes.count >= Self.maxIndexes, let oldest = indexes.values.min(by: { $0.lastUsed < $1.lastUsed }) {
            indexes[oldest.field] = nil
        }
        let index = FieldIndex(field: field, documents: documents, at: now)
        indexes[field] = index
        return index
    }

    /// Drops the indexes no query used since `instant` (their upkeep costs every change).
    public mutating func dropIndexes(unusedSince instant: ContinuousClock.Instant) {
        indexes = indexes.filter { $0.value.lastUsed >= instant }
    }

    /// Keeps every index in step with one document's change (`nil`: absent before, or after).
    mutating func reindex(_ id: String, old: EJSONObject?, new: EJSONObject?) {
        guard !indexes.isEmpty else { return }
        for field in Array(indexes.keys) {
            let before = old?[field]
            let after = new?[field]
            if before == after { continue }
            indexes[field]!.update(id: id, old: before, new: after)
        }
    }
}
