import DDP

/// The in-process server's data: collections of documents in insertion order, keyed by wire id.
struct Database {
    struct Collection {
        var documents: [String: EJSONObject] = [:]
        var order: [String] = []
    }

    /// One write, with the document before and after (`nil`: absent).
    struct Change {
        let sequence: Int
        let collection: String
        let id: String
        let old: EJSONObject?
        let new: EJSONObject?
    }

    private(set) var collections: [String: Collection] = [:]
    private(set) var sequence = 0

    func document(_ collection: String, _ id: String) -> EJSONObject? { collections[collection]?.documents[id] }

    /// Matching documents in insertion order.
    func find(_ collection: String, _ selector: Selector) -> [(id: String, document: EJSONObject)] {
        guard let store = collections[collection] else { return [] }
        if let single = selector.singleID, let id = try? DocumentID(ejson: single).wire {
            guard let document = store.documents[id], selector.matches(document) else { return [] }
            return [(id, document)]
        }
        return store.order.compactMap { id in
            guard let document = store.documents[id], selector.matches(document) else { return nil }
            return (id, document)
        }
    }

    /// Writes a document (insert, replace or remove with `nil`) and returns the change.
    mutating func write(_ collection: String, _ id: String, _ document: EJSONObject?) -> Change {
        sequence += 1
        // Mutated in place: copying the collection out would copy every document on each write.
        let old = collections[collection]?.documents[id]
        switch (old, document) {
        case (nil, let new?):
            collections[collection, default: Collection()].documents[id] = new
            collections[collection]!.order.append(id)
        case (_?, let new?):
            collections[collection]!.documents[id] = new
        case (_?, nil):
            collections[collection]!.documents[id] = nil
            collections[collection]!.order.removeAll { $0 == id }
        case (nil, nil):
            break
        }
        return Change(sequence: sequence, collection: collection, id: id, old: old, new: document)
    }
}
