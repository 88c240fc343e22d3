/// The merged view of every subscription's documents, as Meteor's client keeps it:
/// one document per collection and id, fields set by `added`/`changed`, removed by
/// `cleared` and `removed`, with an order for collections fed by `addedBefore`/`movedBefore`.
///
/// Every mutation returns the change it made (or `nil` when nothing changed), so a
/// consumer can report exactly what happened.
public struct DocumentCache: Sendable, Equatable {
    public struct Collection: Sendable, Equatable {
        public internal(set) var documents: [String: EJSONObject] = [:]
        /// Present only for ordered collections.
        public internal(set) var order: [String]? = nil
    }

    public private(set) var collections: [String: Collection] = [:]

    public init() {}

    public var documentCount: Int { collections.values.reduce(0) { $0 + $1.documents.count } }

    public func document(_ collection: String, _ id: String) -> EJSONObject? {
        collections[collection]?.documents[id]
    }

    /// Applies one data message; other messages are ignored. Returns the change, if any.
    public mutating func apply(_ message: ServerMessage) -> DocumentChange? {
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

    mutating func add(_ collection: String, _ id: String, _ fields: EJSONObject, before: String?, ordered: Bool) -> DocumentChange? {
        // Mutated in place: copying the collection out would copy every document on each add.
        if ordered { Self.placeInOrder(&collections[collection, default: Collection()], id, before: before) }
        guard let existing = collections[collection]?.documents[id] else {
            collections[collection, default: Collection()].documents[id] = fields
            return .added(collection: collection, id: id, fields: fields)
        }
        // An add for a document already held (tolerated, as while resetting): it replaces it.
        collections[collection]!.documents[id] = fields
        let cleared = existing.keys.filter { fields[$0] == nil }
        return Self.fieldChange(collection, id, old: existing, fields: fields, cleared: cleared)
    }

    mutating func change(_ collection: String, _ id: String, fields: EJSONObject, cleared: [String]) -> DocumentChange? {
        guard var document = collections[collection]?.documents[id] else {
            // A change for an unknown document: keep what it says rather than lose it.
            if fields.isEmpty { return nil }
            return add(collection, id, fields, before: nil, ordered: false)
        }
        let change = Self.fieldChange(collection, id, old: document, fields: fields, cleared: cleared)
        guard change != nil else { return nil }
        for field in fields { document[field.key] = field.value }
        document.removeValues(forKeys: cleared)
        collections[collection]!.documents[id] = document
        return change
    }

    mutating func remove(_ collection: String, _ id: String) -> DocumentChange? {
        guard let previous = collections[collection]?.documents.removeValue(forKey: id) else { return nil }
        if collections[collection]!.order != nil { collections[collection]!.order!.removeAll { $0 == id } }
        if collections[collection]!.documents.isEmpty { collections[collection] = nil }
        return .removed(collection: collection, id: id, previous: previous)
    }

    mutating func move(_ collection: String, _ id: String, before: String?) -> DocumentChange? {
        guard collections[collection]?.documents[id] != nil else { return nil }
        let old = collections[collection]!.order
        Self.placeInOrder(&collections[collection]!, id, before: before)
        return old == collections[collection]!.order ? nil : .moved(collection: collection, id: id, before: before)
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
            guard let before = old[key] else { continue }
            reallyCleared.append(key)
            previous[key] = before
        }
        if changed.isEmpty && reallyCleared.isEmpty { return nil }
        return .changed(collection: collection, id: id, fields: changed, cleared: reallyCleared, previous: previous)
    }

    /// The changes that turn `old` into `new`, document by document: what a consumer of
    /// `old` must apply to hold `new`. Unchanged documents produce nothing.
    public static func difference(from old: DocumentCache, to new: DocumentCache) -> [DocumentChange] {
        var changes: [DocumentChange] = []
        let names = Set(old.collections.keys).union(new.collections.keys).sorted()
        for name in names {
            let before = old.collections[name] ?? Collection()
            let after = new.collections[name] ?? Collection()
            for id in before.documents.keys.sorted() where after.documents[id] == nil {
                changes.append(.removed(collection: name, id: id, previous: before.documents[id]!))
            }
            for id in after.documents.keys.sorted() {
                let fields = after.documents[id]!
                guard let previous = before.documents[id] else {
                    changes.append(.added(collection: name, id: id, fields: fields))
                    continue
                }
                let cleared = previous.keys.filter { fields[$0] == nil }
                if let change = fieldChange(name, id, old: previous, fields: fields, cleared: cleared) {
                    changes.append(change)
                }
            }
            // Ordered: place every document before its new successor, last first; the result is the new order.
            if let newOrder = after.order {
                let survivors = (before.order ?? []).filter { after.documents[$0] != nil }
                let appended = newOrder.filter { before.documents[$0] == nil }
                if survivors + appended != newOrder {
                    for (i, id) in newOrder.enumerated().reversed() {
                        changes.append(.moved(collection: name, id: id, before: i + 1 < newOrder.count ? newOrder[i + 1] : nil))
                    }
                }
            }
        }
        return changes
    }
}
