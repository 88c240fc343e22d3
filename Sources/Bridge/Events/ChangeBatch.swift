public import DDP

/// Changes gathered over a short window and consolidated per document: what a consumer
/// sees is the difference between each document's state at the start of the batch and
/// its state at the end. Added then removed is nothing; a field set back is nothing.
public struct ChangeBatch: Sendable {
    struct Key: Hashable, Sendable {
        let collection: String
        let id: String
    }

    struct Entry: Sendable {
        /// The document when the batch started (`nil`: absent).
        var before: EJSONObject?
        /// The document now.
        var after: EJSONObject?
        /// The last `moved` seen for it.
        var moved: String??
    }

    private var entries: [Key: Entry] = [:]
    private var order: [Key] = []

    public init() {}

    public var isEmpty: Bool { entries.isEmpty }

    /// Records one change; `document` is the document after it (`nil` once removed).
    public mutating func add(_ change: DocumentChange, document: EJSONObject?) {
        let key = Key(collection: change.collection, id: change.id)
        if entries[key] == nil {
            entries[key] = Entry(before: Self.before(change, after: document), after: document, moved: nil)
            order.append(key)
        } else {
            entries[key]!.after = document
        }
        if case .moved(_, _, let before) = change { entries[key]!.moved = .some(before) }
    }

    /// The consolidated changes (each with the document after it), in the order documents were
    /// first touched; empties the batch.
    public mutating func flush() -> [(change: DocumentChange, document: EJSONObject?)] {
        var out: [(change: DocumentChange, document: EJSONObject?)] = []
        for key in order {
            guard let entry = entries[key] else { continue }
            switch (entry.before, entry.after) {
            case (nil, let after?):
                out.append((.added(collection: key.collection, id: key.id, fields: after), after))
            case (let before?, nil):
                out.append((.removed(collection: key.collection, id: key.id, previous: before), nil))
            case (let before?, let after?):
                let cleared = before.keys.filter { after[$0] == nil }
                if let change = DocumentCache.fieldChange(key.collection, key.id, old: before, fields: after, cleared: cleared) {
                    out.append((change, after))
                }
            case (nil, nil):
                break
            }
            if let after = entry.after, case .some(let before) = entry.moved {
                out.append((.moved(collection: key.collection, id: key.id, before: before), after))
            }
        }
        entries = [:]
        order = []
        return out
    }

    /// The document before a change, from the change and the document after it.
    static func before(_ change: DocumentChange, after: EJSONObject?) -> EJSONObject? {
        switch change {
        case .added:
            return nil
        case .removed(_, _, let previous):
            return previous
        case .moved:
            return after
        case .changed(_, _, let fields, let cleared, let previous):
            guard var document = after else { return nil }
            for field in fields {
                if let old = previous[field.key] { document[field.key] = old } else { document.removeValue(forKey: field.key) }
            }
            for key in cleared { document[key] = previous[key] }
            return document
        }
    }
}
