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

    /// Built from `documents` (O(n log n)): outside the cache's owner, by whoever asked for it
    /// (``DocumentCache/indexing(_:fields:at:)``).
    public init(field: String, documents: DocumentMap, at now: ContinuousClock.Instant) {
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

/// An index a query builds outside the cache's owner, from its copy of a collection, and hands
/// back to be kept (``DocumentCache/keep(_:in:build:builtFrom:at:)``). Only one build per field
/// at a time can be kept: the cache notes the documents that change meanwhile and applies them to
/// the index when it comes back.
public struct IndexBuild: Sendable, Equatable {
    public let field: String
    /// `nil`: another build of the field is under way; this one is for its query only.
    let token: UInt64?

    /// Whether the index built can be handed back to be kept.
    public var canBeKept: Bool { token != nil }
}

/// A build under way: its token, when it began, and the documents changed since (`nil` past
/// ``maxChanges``: too many to apply, the index is not kept).
struct PendingIndexBuild: Sendable {
    let token: UInt64
    let started: ContinuousClock.Instant
    var changed: Set<String>?

    static let maxChanges = 10_000
    /// A build not handed back after this long is taken as abandoned (its query ended).
    static let abandonedAfter: Duration = .seconds(60)
}

extension DocumentCache {
    /// How long an index no query uses is kept up.
    public static let indexIdleLimit: Duration = .seconds(300)

    /// One collection, for a query to run on outside the cache's owner, with the indexes of
    /// `fields` the cache keeps (marked used), and a build for each one it does not have: the
    /// query builds that index from its copy (``FieldIndex/init(field:documents:at:)``), off the
    /// owner's executor, and hands it back (``keep(_:in:build:builtFrom:at:)``). Indexes unused
    /// for ``indexIdleLimit`` are dropped. Nothing here is in proportion to the documents.
    public mutating func indexing(_ collection: String, fields: [String], at now: ContinuousClock.Instant) -> (
        collection: Collection, builds: [IndexBuild]
    )? {
        guard collections[collection] != nil else { return nil }
        collections[collection]!.dropIndexes(unusedSince: now - Self.indexIdleLimit)
        var builds: [IndexBuild] = []
        for field in fields {
            if collections[collection]!.indexes[field] != nil {
                collections[collection]!.indexes[field]!.lastUsed = now
                continue
            }
            if let pending = collections[collection]!.builds[field], now - pending.started < PendingIndexBuild.abandonedAfter {
                builds.append(IndexBuild(field: field, token: nil))
                continue
            }
            lastBuildToken &+= 1
            collections[collection]!.builds[field] = PendingIndexBuild(token: lastBuildToken, started: now, changed: [])
            builds.append(IndexBuild(field: field, token: lastBuildToken))
        }
        return (collections[collection]!, builds)
    }

    /// Keeps `index`, built by `build` from `documents` (a version of the collection), brought up
    /// to date with the documents changed since; O(changes). Returns whether it was kept: not
    /// when the build is not the field's current one, too much changed meanwhile, or the
    /// collection went away (the query used its index anyway).
    @discardableResult
    public mutating func keep(
        _ index: FieldIndex, in collection: String, build: IndexBuild, builtFrom documents: DocumentMap, at now: ContinuousClock.Instant
    ) -> Bool {
        guard let token = build.token, let pending = collections[collection]?.builds[build.field], pending.token == token else { return false }
        collections[collection]!.builds[build.field] = nil
        guard let changed = pending.changed, collections[collection]!.indexes[build.field] == nil, index.field == build.field else { return false }
        var index = index
        let current = collections[collection]!.documents
        for id in changed {
            let old = documents[id]?[build.field]
            let new = current[id]?[build.field]
            if old != new { index.update(id: id, old: old, new: new) }
        }
        index.lastUsed = now
        collections[collection]!.add(index)
        return true
    }

    /// One collection, with an index of each of `fields` (built now when missing), for a query
    /// to run on outside the cache's owner; indexes unused for ``indexIdleLimit`` are dropped.
    /// Builds inside the owner: tests compare it with ``indexing(_:fields:at:)``.
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
        let index = FieldIndex(field: field, documents: documents, at: now)
        add(index)
        return index
    }

    /// Keeps `index`; past ``maxIndexes`` the least recently used goes.
    mutating func add(_ index: FieldIndex) {
        if indexes[index.field] == nil, indexes.count >= Self.maxIndexes, let oldest = indexes.values.min(by: { $0.lastUsed < $1.lastUsed }) {
            indexes[oldest.field] = nil
        }
        indexes[index.field] = index
    }

    /// This copy's query uses `index` (built from this copy's documents); the cache is not changed.
    public mutating func use(_ index: FieldIndex) { indexes[index.field] = index }

    /// Drops the indexes no query used since `instant` (their upkeep costs every change).
    public mutating func dropIndexes(unusedSince instant: ContinuousClock.Instant) {
        indexes = indexes.filter { $0.value.lastUsed >= instant }
    }

    /// Keeps every index in step with one document's change (`nil`: absent before, or after).
    mutating func reindex(_ id: String, old: EJSONObject?, new: EJSONObject?) {
        if !builds.isEmpty { noteChangeDuringBuilds(id) }
        guard !indexes.isEmpty else { return }
        for field in Array(indexes.keys) {
            let before = old?[field]
            let after = new?[field]
            if before == after { continue }
            indexes[field]!.update(id: id, old: before, new: after)
        }
    }

    /// A document changed while indexes are being built: noted for each, up to a bound.
    private mutating func noteChangeDuringBuilds(_ id: String) {
        for field in Array(builds.keys) where builds[field]!.changed != nil {
            builds[field]!.changed!.insert(id)
            if builds[field]!.changed!.count > PendingIndexBuild.maxChanges { builds[field]!.changed = nil }
        }
    }
}
