public import DDP

/// Changes gathered over a short window and consolidated per document: what a consumer
/// sees is the difference between each document's state at the start of the batch and
/// its state at the end. Added then removed is nothing; a field set back is nothing.
///
/// A document touched once in the window goes out as the change the cache made (no second
/// derivation). Only a document touched several times is consolidated, and then only over
/// the fields those changes touched (linear in the fields changed, not in the document).
public struct ChangeBatch: Sendable {
    struct Key: Hashable, Sendable {
        let collection: String
        let id: String
    }

    struct Entry: Sendable {
        /// The document when the batch started (`nil`: absent).
        var before: EJSONObject?
        /// The document now (`nil`: absent).
        var after: EJSONObject?
        /// The change as the cache made it, while it is the only one for this document.
        var only: DocumentChange?
        /// The fields changed since the batch started, in the order touched (repeats allowed);
        /// `nil` after a whole-document change (removed and added again), when every field counts.
        var touched: [String]? = []
        /// The last `moved` seen for it.
        var moved: String??
    }

    private var entries: [Key: Entry] = [:]
    private var order: [Key] = []

    public init() {}

    public var isEmpty: Bool { entries.isEmpty }

    /// Records one change.
    public mutating func add(_ applied: AppliedChange) {
        let key = Key(collection: applied.collection, id: applied.id)
        // One hash lookup per change; a document already in the batch is updated in place.
        if let index = entries.index(forKey: key) {
            entries.values[index].only = nil
            entries.values[index].after = applied.after
            entries.values[index].note(applied.change)
            return
        }
        var entry = Entry(before: applied.before, after: applied.after, only: applied.change)
        entry.note(applied.change)
        entries[key] = entry
        order.append(key)
    }

    /// The consolidated changes (each with the document after it), in the order documents were
    /// first touched; empties the batch.
    public mutating func flush() -> [(change: DocumentChange, document: EJSONObject?)] {
        var out: [(change: DocumentChange, document: EJSONObject?)] = []
        out.reserveCapacity(order.count)
        for key in order {
            guard let entry = entries[key] else { continue }
            if let only = entry.only {
                out.append((only, entry.after))
                continue
            }
            switch (entry.before, entry.after) {
            case (nil, let after?):
                out.append((.added(collection: key.collection, id: key.id, fields: after), after))
            case (let before?, nil):
                out.append((.removed(collection: key.collection, id: key.id, previous: before), nil))
            case (let before?, let after?):
                if let change = Self.consolidated(key, before: before, after: after, touched: entry.touched) {
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

    /// The net change from `before` to `after` over the fields touched (all of them when `nil`).
    static func consolidated(_ key: Key, before: EJSONObject, after: EJSONObject, touched: [String]?) -> DocumentChange? {
        guard let touched else {
            let cleared = before.keys.filter { after[$0] == nil }
            return DocumentCache.fieldChange(key.collection, key.id, old: before, fields: after, cleared: cleared)
        }
        var fields = EJSONObject()
        var cleared: [String] = []
        var seen = Set<String>()
        for name in touched where seen.insert(name).inserted {
            if let value = after[name] { fields[name] = value } else { cleared.append(name) }
        }
        return DocumentCache.fieldChange(key.collection, key.id, old: before, fields: fields, cleared: cleared)
    }
}

extension ChangeBatch.Entry {
    mutating func note(_ change: DocumentChange) {
        switch change {
        case .added, .removed:
            // Whole-document changes: a document removed and added again within the batch is
            // compared whole (when it is only added or only removed, the document is the change).
            touched = nil
        case .changed(_, _, let fields, let cleared, _):
            touched?.append(contentsOf: fields.keys)
            touched?.append(contentsOf: cleared)
        case .moved(_, _, let before):
            moved = .some(before)
        }
    }
}
