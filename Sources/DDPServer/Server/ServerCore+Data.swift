public import DDP

extension ServerCore {
    // MARK: - Writes (server side: tests, demo and benchmarks change data through these)

    /// Inserts a document and publishes it; returns its wire id.
    @discardableResult
    public func insert(_ collection: String, _ document: EJSONObject) throws -> String {
        try insert(collection, document, randomSeed: nil, fenced: false)
    }

    /// Updates documents matching `selector` with a modifier (or replacement); returns the count.
    @discardableResult
    public func update(_ collection: String, _ selector: EJSON, _ modifier: EJSONObject) throws -> Int {
        try update(collection, selector, modifier, fenced: false)
    }

    @discardableResult
    public func remove(_ collection: String, _ selector: EJSON) throws -> Int {
        try remove(collection, selector, fenced: false)
    }

    /// Every stored document of a collection, `_id` included, in insertion order.
    public func find(_ collection: String, _ selector: EJSON = [:]) throws -> [EJSONObject] {
        database.find(collection, try makeSelector(selector)).map(\.document)
    }

    /// The documents a client subscribed to `collection` should hold: id → fields without `_id`.
    public func publishedView(_ collection: String, _ selector: EJSON = [:]) throws -> [String: EJSONObject] {
        var out: [String: EJSONObject] = [:]
        for (id, document) in database.find(collection, try makeSelector(selector)) {
            out[id] = Cursor(collection).project(document)
        }
        return out
    }

    func insert(_ collection: String, _ document: EJSONObject, randomSeed: String?, fenced: Bool) throws -> String {
        var document = document
        let id: String
        if let given = document["_id"] {
            do { id = try DocumentID(ejson: given).wire } catch { throw DDPError.meteor(400, "Invalid _id: \(error.reason)") }
        } else {
            var generator = randomSeed.map { AleaRandom(randomSeed: $0, stream: "/collection/\(collection)") }
            let newID = generator?.id() ?? MeteorRandom.id()
            id = newID
            var withID: EJSONObject = ["_id": .string(newID)]
            for field in document { withID[field.key] = field.value }
            document = withID
        }
        guard database.document(collection, id) == nil else {
            throw DDPError.meteor(409, "Duplicate key: a document with _id '\(id)' already exists in \(collection)")
        }
        record(database.write(collection, id, document), fenced: fenced)
        return id
    }

    func update(_ collection: String, _ selector: EJSON, _ modifier: EJSONObject, fenced: Bool) throws -> Int {
        let matches = database.find(collection, try makeSelector(selector))
        for (id, document) in matches {
            let updated = try Modifier.apply(modifier, to: document)
            guard !updated.equals(document, keyOrderSensitive: true) else { continue }
            record(database.write(collection, id, updated), fenced: fenced)
        }
        return matches.count
    }

    func remove(_ collection: String, _ selector: EJSON, fenced: Bool) throws -> Int {
        let matches = database.find(collection, try makeSelector(selector))
        for (id, _) in matches { record(database.write(collection, id, nil), fenced: fenced) }
        return matches.count
    }

    func makeSelector(_ value: EJSON) throws -> Selector {
        do { return try Selector(value) } catch { throw DDPError.meteor(400, "Invalid selector: \(error.reason)") }
    }

    /// A write outside a method is published at once; inside one, when the method ends.
    private func record(_ change: Database.Change, fenced: Bool) {
        if fenced {
            self.fenced.append(change)
        } else {
            for (connection, message) in flushFenced() + publishChange(change) { send(connection, message) }
        }
    }

    /// Publishes the writes methods made, in order; returns the messages to send.
    func flushFenced() -> [(Int, ServerMessage)] {
        let changes = fenced
        fenced = []
        return changes.flatMap { publishChange($0) }
    }

    /// Runs one write through every observer of its collection, updating merge boxes.
    private func publishChange(_ change: Database.Change) -> [(Int, ServerMessage)] {
        guard let watching = observers[change.collection], !watching.isEmpty else { return [] }
        var out: [(Int, ServerMessage)] = []
        for observer in watching where change.sequence > observer.since {
            let cursor = observer.cursor
            let was = change.old.map { cursor.selector.matches($0) } ?? false
            let now = change.new.map { cursor.selector.matches($0) } ?? false
            let message: ServerMessage?
            switch (was, now) {
            case (false, true):
                message = subscriptionAdded(observer.connection, observer.subscription, change.collection, change.id, cursor.project(change.new!))
            case (true, true):
                let before = cursor.project(change.old!)
                let after = cursor.project(change.new!)
                var fields = EJSONObject()
                for field in after where before[field.key].map({ !$0.equals(field.value, keyOrderSensitive: true) }) ?? true {
                    fields[field.key] = field.value
                }
                let cleared = before.keys.filter { after[$0] == nil }
                message =
                    fields.isEmpty && cleared.isEmpty
                    ? nil
                    : connections[observer.connection]?.mergeBox.changed(
                        sub: observer.subscription, change.collection, change.id, fields: fields, cleared: cleared)
            case (true, false):
                message = subscriptionRemoved(observer.connection, observer.subscription, change.collection, change.id)
            case (false, false):
                message = nil
            }
            if let message { out.append((observer.connection, message)) }
        }
        return out
    }

    func subscriptionAdded(_ connection: Int, _ sub: String, _ collection: String, _ id: String, _ fields: EJSONObject) -> ServerMessage? {
        guard connections[connection]?.subscriptions[sub] != nil else { return nil }
        connections[connection]!.subscriptions[sub]!.documents[collection, default: []].insert(id)
        return connections[connection]!.mergeBox.added(sub: sub, collection, id, fields)
    }

    func subscriptionRemoved(_ connection: Int, _ sub: String, _ collection: String, _ id: String) -> ServerMessage? {
        guard connections[connection]?.subscriptions[sub] != nil else { return nil }
        connections[connection]!.subscriptions[sub]!.documents[collection]?.remove(id)
        return connections[connection]!.mergeBox.removed(sub: sub, collection, id)
    }
}
