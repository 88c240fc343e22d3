#if canImport(HashTreeCollections)
    public import HashTreeCollections

    /// A collection's documents by id: a persistent hash map (``DocumentCache/Collection/documents``).
    public typealias DocumentMap = TreeDictionary<String, EJSONObject>
    /// When each document of a collection arrived, by id (``DocumentCache/Collection/arrivals``).
    public typealias ArrivalMap = TreeDictionary<String, UInt64>
#else
    /// The fuzz targets compile this module alone, without swift-collections: there the map is
    /// Swift's dictionary, which has the same interface (scripts/fuzz.sh).
    public typealias DocumentMap = [String: EJSONObject]
    public typealias ArrivalMap = [String: UInt64]
#endif

/// The merged view of every subscription's documents, as Meteor's client keeps it:
/// one document per collection and id, fields set by `added`/`changed`, removed by
/// `cleared` and `removed`, with an order for collections fed by `addedBefore`/`movedBefore`.
///
/// Every mutation returns the change it made (or `nil` when nothing changed), so a
/// consumer can report exactly what happened.
public struct DocumentCache: Sendable, Equatable {
    public struct Collection: Sendable, Equatable {
        /// A persistent hash map (structure shared between versions): a copy is O(1) and a
        /// change to one copy rebuilds only the path to the entry it touches, so a reader walking
        /// a copy (a stream's snapshot, a query) pins only what changed since it took it.
        public internal(set) var documents: DocumentMap = [:]
        /// Present only for ordered collections.
        public internal(set) var order: [String]? = nil
        /// The order the documents arrived in, as a number per id (a document removed and added
        /// again arrives anew): the order Meteor's client keeps them in, so the order of a query's
        /// answer without a sort, and of its ties.
        public internal(set) var arrivals: ArrivalMap = [:]
        /// The number the next document to arrive takes.
        var nextArrival: UInt64 = 0
        /// Indexes of top-level fields that queries asked for (``FieldIndex``), kept by every change.
        public internal(set) var indexes: [String: FieldIndex] = [:]
        /// Indexes being built outside the cache's owner, by field (``DocumentCache/indexing(_:fields:at:)``).
        var builds: [String: PendingIndexBuild] = [:]

        /// The same documents in the same order (indexes are a means, not content).
        public static func == (a: Collection, b: Collection) -> Bool { a.documents == b.documents && a.order == b.order }
    }

    public internal(set) var collections: [String: Collection] = [:]
    /// The last token handed to an index build (``IndexBuild``).
    var lastBuildToken: UInt64 = 0
    /// An estimate of the memory the documents take (``DocumentCache/cost(id:_:)``), kept as they
    /// change, each step in proportion to the fields it touches: what a memory budget charges.
    public private(set) var estimatedBytes = 0

    public init() {}

    /// Bookkeeping per document (its entry in the collection, its id) and per field (its slot and
    /// key); values by ``EJSON/estimatedBytes``. Calibrated on the demo's `bulk` documents: ~470
    /// estimated for ~500 bytes of resident memory each.
    static let documentOverhead = 128
    static let fieldOverhead = 64

    static func cost(key: String, _ value: EJSON) -> Int { fieldOverhead + key.utf8.count + value.estimatedBytes }

    public static func cost(id: String, _ document: EJSONObject) -> Int {
        document.fields.reduce(documentOverhead + id.utf8.count) { $0 + cost(key: $1.key, $1.value) }
    }

    public var documentCount: Int { collections.values.reduce(0) { $0 + $1.documents.count } }

    public func document(_ collection: String, _ id: String) -> EJSONObject? {
        collections[collection]?.documents[id]
    }

    /// Applies one data message; other messages are ignored. Returns the change with the
    /// document before and after it (`nil` when nothing changed).
    public mutating func apply(_ message: ServerMessage) -> AppliedChange? {
        switch message {
        case .added(let collection, let id, let fields):
            return add(collection, id, fields, before: nil, ordered: false)
        case .addedBefore(let collection, let id, let fields, let before):
            return add(collection, id, fields, before: before, ordered: true)
        case .changed(let collection, let id, let fields, let cleared):
            return change(collection, id, fields: fields, cleared: cleared)
        case .removed(let collection, let id):
            return remove(collection, id)
        case .movedBefore(let collection, let id, let before):
            return move(collection, id, before: before)
        default:
            return nil
        }
    }

    mutating func add(_ collection: String, _ id: String, _ fields: EJSONObject, before: String?, ordered: Bool) -> AppliedChange? {
        // Mutated in place: copying the collection out would copy every document on each add.
        if ordered { Self.placeInOrder(&collections[collection, default: Collection()], id, before: before) }
        guard let existing = collections[collection]?.documents.updateValue(fields, forKey: id) else {
            if collections[collection] == nil {
                collections[collection] = Collection(documents: [id: fields], arrivals: [id: 0], nextArrival: 1)
            } else {
                collections[collection]!.arrivals[id] = collections[collection]!.nextArrival
                collections[collection]!.nextArrival += 1
                collections[collection]!.reindex(id, old: nil, new: fields)
            }
            estimatedBytes += Self.cost(id: id, fields)
            return AppliedChange(.added(collection: collection, id: id, fields: fields), before: nil, after: fields)
        }
        collections[collection]!.reindex(id, old: existing, new: fields)
        estimatedBytes += Self.cost(id: id, fields) - Self.cost(id: id, existing)
        // An add for a document already held (tolerated, as while resetting): it replaces it.
        let cleared = existing.keys.filter { fields[$0] == nil }
        return Self.fieldChange(collection, id, old: existing, fields: fields, cleared: cleared)
            .map { AppliedChange($0, before: existing, after: fields) }
    }

    mutating func change(_ collection: String, _ id: String, fields: EJSONObject, cleared: [String]) -> AppliedChange? {
        guard let existing = collections[collection]?.documents[id] else {
            // A change for an unknown document: keep what it says rather than lose it.
            if fields.isEmpty { return nil }
            return add(collection, id, fields, before: nil, ordered: false)
        }
        guard let change = Self.fieldChange(collection, id, old: existing, fields: fields, cleared: cleared) else { return nil }
        var document = existing
        for field in fields { document[field.key] = field.value }
        document.removeValues(forKeys: cleared)
        collections[collection]!.documents[id] = document
        collections[collection]!.reindex(id, old: existing, new: document)
        if case .changed(_, _, let set, let gone, let previous) = change {
            for field in set {
                estimatedBytes += Self.cost(key: field.key, field.value) - (previous[field.key].map { Self.cost(key: field.key, $0) } ?? 0)
            }
            for key in gone { estimatedBytes -= previous[key].map { Self.cost(key: key, $0) } ?? 0 }
        }
        return AppliedChange(change, before: existing, after: document)
    }

    mutating func remove(_ collection: String, _ id: String) -> AppliedChange? {
        guard let previous = collections[collection]?.documents.removeValue(forKey: id) else { return nil }
        collections[collection]!.arrivals.removeValue(forKey: id)
        collections[collection]!.reindex(id, old: previous, new: nil)
        estimatedBytes -= Self.cost(id: id, previous)
        if collections[collection]!.order != nil { collections[collection]!.order!.removeAll { $0 == id } }
        if collections[collection]!.documents.isEmpty { collections[collection] = nil }
        return AppliedChange(.removed(collection: collection, id: id, previous: previous), before: previous, after: nil)
    }

    mutating func move(_ collection: String, _ id: String, before: String?) -> AppliedChange? {
        guard let document = collections[collection]?.documents[id] else { return nil }
        let old = collections[collection]!.order
        Self.placeInOrder(&collections[collection]!, id, before: before)
        guard old != collections[collection]!.order else { return nil }
        return AppliedChange(.moved(collection: collection, id: id, before: before), before: document, after: document)
    }

    private static func placeInOrder(_ store: inout Collection, _ id: String, before: String?) {
        var order = store.order ?? Array(store.documents.keys).sorted()
        order.removeAll { $0 == id }
        if let before, let position = order.firstIndex(of: before) {
            order.insert(id, at: position)
        } else {
            order.append(id)
        }
        store.order = order
    }

    /// The net effect of setting `fields` and clearing `cleared` on `old`; `nil` when nothing changes.
    public static func fieldChange(_ collection: String, _ id: String, old: EJSONObject, fields: EJSONObject, cleared: [String]) -> DocumentChange? {
        var changed = EJSONObject()
        var previous = EJSONObject()
        var reallyCleared: [String] = []
        for field in fields {
            let before = old[field.key]
            if let before, before.equals(field.value, keyOrderSensitive: true) { continue }
            changed[field.key] = field.value
            if let before { previous[field.key] = before }
        }
        for key in cleared where fields[key] == nil {
            // A key named twice in `cleared` is cleared once.
            guard let before = old[key], previous[key] == nil else { continue }
            reallyCleared.append(key)
            previous[key] = before
        }
        if changed.isEmpty && reallyCleared.isEmpty { return nil }
        return .changed(collection: collection, id: id, fields: changed, cleared: reallyCleared, previous: previous)
    }

    /// The changes that turn `old` into `new`, document by document: what a consumer of
    /// `old` must apply to hold `new`. Unchanged documents produce nothing.
    public static func difference(from old: DocumentCache, to new: DocumentCache) -> [AppliedChange] {
        var changes: [AppliedChange] = []
        let names = Set(old.collections.keys).union(new.collections.keys).sorted()
        for name in names {
            let before = old.collections[name] ?? Collection()
            let after = new.collections[name] ?? Collection()
            for (id, previous) in before.documents.sorted(by: { $0.key < $1.key }) where after.documents[id] == nil {
                changes.append(AppliedChange(.removed(collection: name, id: id, previous: previous), before: previous, after: nil))
            }
            for (id, fields) in after.documents.sorted(by: { $0.key < $1.key }) {
                guard let previous = before.documents[id] else {
                    changes.append(AppliedChange(.added(collection: name, id: id, fields: fields), before: nil, after: fields))
                    continue
                }
                let cleared = previous.keys.filter { fields[$0] == nil }
                if let change = fieldChange(name, id, old: previous, fields: fields, cleared: cleared) {
                    changes.append(AppliedChange(change, before: previous, after: fields))
                }
            }
            // Ordered: place every document before its new successor, last first; the result is the new order.
            if let newOrder = after.order {
                let survivors = (before.order ?? []).filter { after.documents[$0] != nil }
                let appended = newOrder.filter { before.documents[$0] == nil }
                if survivors + appended != newOrder {
                    for (i, id) in newOrder.enumerated().reversed() {
                        let document = after.documents[id]
                        changes.append(
                            AppliedChange(
                                .moved(collection: name, id: id, before: i + 1 < newOrder.count ? newOrder[i + 1] : nil),
                                before: document, after: document))
                    }
                }
            }
        }
        return changes
    }
}
