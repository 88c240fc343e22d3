import DDP

/// One connection's view of published documents, as Meteor's server keeps it
/// (`SessionCollectionView`): documents published by several subscriptions are sent
/// once, with the union of their fields; a field's visible value is the one of the
/// first subscription that set it. Each operation returns the message to send, if any.
struct MergeBox {
    struct Entry {
        var sub: String
        var value: EJSON
    }

    struct Document {
        var existsIn: [String] = []
        var fieldOrder: [String] = []
        var fields: [String: [Entry]] = [:]

        var visible: EJSONObject {
            EJSONObject(uniqueFieldsInOrder: fieldOrder.map { EJSONObject.Field(key: $0, value: fields[$0]![0].value) })
        }
    }

    private(set) var collections: [String: [String: Document]] = [:]

    func contains(_ collection: String, _ id: String) -> Bool { collections[collection]?[id] != nil }

    mutating func added(sub: String, _ collection: String, _ id: String, _ fields: EJSONObject) -> ServerMessage? {
        guard var document = collections[collection]?[id] else {
            var document = Document(existsIn: [sub])
            for field in fields {
                document.fieldOrder.append(field.key)
                document.fields[field.key] = [Entry(sub: sub, value: field.value)]
            }
            collections[collection, default: [:]][id] = document
            return .added(collection: collection, id: id, fields: fields)
        }
        if !document.existsIn.contains(sub) { document.existsIn.append(sub) }
        var changed = EJSONObject()
        var cleared: [String] = []
        for field in fields { Self.set(&document, sub: sub, field.key, field.value, changed: &changed) }
        collections[collection]![id] = document
        return Self.changedMessage(collection, id, changed, &cleared)
    }

    mutating func changed(sub: String, _ collection: String, _ id: String, fields: EJSONObject, cleared clearedKeys: [String]) -> ServerMessage? {
        guard var document = collections[collection]?[id], document.existsIn.contains(sub) else { return nil }
        var changed = EJSONObject()
        var cleared: [String] = []
        for field in fields { Self.set(&document, sub: sub, field.key, field.value, changed: &changed) }
        for key in clearedKeys { Self.clear(&document, sub: sub, key, changed: &changed, cleared: &cleared) }
        Self.dropCleared(&document, cleared)
        collections[collection]![id] = document
        return Self.changedMessage(collection, id, changed, &cleared)
    }

    mutating func removed(sub: String, _ collection: String, _ id: String) -> ServerMessage? {
        guard var document = collections[collection]?[id], let index = document.existsIn.firstIndex(of: sub) else { return nil }
        document.existsIn.remove(at: index)
        if document.existsIn.isEmpty {
            collections[collection]![id] = nil
            if collections[collection]!.isEmpty { collections[collection] = nil }
            return .removed(collection: collection, id: id)
        }
        var changed = EJSONObject()
        var cleared: [String] = []
        for key in document.fieldOrder { Self.clear(&document, sub: sub, key, changed: &changed, cleared: &cleared) }
        Self.dropCleared(&document, cleared)
        collections[collection]![id] = document
        return Self.changedMessage(collection, id, changed, &cleared)
    }

    /// Everything the client holds, as a cache (to diff two views after a login re-run).
    var visibleCache: DocumentCache {
        var cache = DocumentCache()
        for (collection, documents) in collections {
            for (id, document) in documents {
                _ = cache.apply(.added(collection: collection, id: id, fields: document.visible))
            }
        }
        return cache
    }

    private static func set(_ document: inout Document, sub: String, _ key: String, _ value: EJSON, changed: inout EJSONObject) {
        guard var entries = document.fields[key] else {
            document.fields[key] = [Entry(sub: sub, value: value)]
            document.fieldOrder.append(key)
            changed[key] = value
            return
        }
        if let i = entries.firstIndex(where: { $0.sub == sub }) {
            if i == 0 && !entries[0].value.equals(value, keyOrderSensitive: true) { changed[key] = value }
            entries[i].value = value
        } else {
            entries.append(Entry(sub: sub, value: value))
        }
        document.fields[key] = entries
    }

    private static func clear(_ document: inout Document, sub: String, _ key: String, changed: inout EJSONObject, cleared: inout [String]) {
        guard var entries = document.fields[key], let i = entries.firstIndex(where: { $0.sub == sub }) else { return }
        let old = entries.remove(at: i).value
        if entries.isEmpty {
            document.fields[key] = nil  // and out of `fieldOrder` in `dropCleared`, once per message
            cleared.append(key)
            return
        }
        document.fields[key] = entries
        if i == 0 && !entries[0].value.equals(old, keyOrderSensitive: true) { changed[key] = entries[0].value }
    }

    /// Takes cleared fields out of the order in one pass (one by one was quadratic for wide documents).
    private static func dropCleared(_ document: inout Document, _ cleared: [String]) {
        guard !cleared.isEmpty else { return }
        let fields = document.fields
        document.fieldOrder.removeAll { fields[$0] == nil }
    }

    private static func changedMessage(_ collection: String, _ id: String, _ fields: EJSONObject, _ cleared: inout [String]) -> ServerMessage? {
        if fields.isEmpty && cleared.isEmpty { return nil }
        return .changed(collection: collection, id: id, fields: fields, cleared: cleared)
    }
}
