import DDP
import Logging

extension ServerCore {
    func subscribe(_ connection: Int, _ id: String, name: String, params: [EJSON]) {
        // Meteor ignores a sub whose id is already in use.
        guard connections[connection]?.subscriptions[id] == nil else { return }
        guard let publication = configuration.publications[name] else {
            send(connection, .nosub(id: id, error: .meteor(404, "Subscription '\(name)' not found")))
            return
        }
        connections[connection]!.subscriptions[id] = Subscription(name: name, params: params, universal: false)
        connections[connection]!.subscriptionOrder.append(id)
        for message in run(publication, connection, id) { send(connection, message) }
    }

    func unsubscribe(_ connection: Int, _ id: String) {
        guard connections[connection]?.subscriptions[id] != nil else { return }
        for message in stop(connection, id) { send(connection, message) }
        connections[connection]!.subscriptions[id] = nil
        connections[connection]!.subscriptionOrder.removeAll { $0 == id }
        send(connection, .nosub(id: id, error: nil))
    }

    func startUniversalSubscriptions(_ connection: Int, silently: Bool) {
        for (index, publication) in configuration.universalPublications.enumerated() {
            let key = "universal:\(index)"
            connections[connection]!.subscriptions[key] = Subscription(name: "", params: [], universal: true)
            let messages = run(publication, connection, key)
            if !silently { for message in messages { send(connection, message) } }
        }
    }

    /// Runs a publication for a subscription already registered; returns the messages to send
    /// (its documents, then `ready` or `nosub`).
    func run(_ publication: Publication, _ connection: Int, _ sub: String) -> [ServerMessage] {
        guard let subscription = connections[connection]?.subscriptions[sub] else { return [] }
        var run = PublicationRun(userId: connections[connection]!.userId, params: subscription.params)
        do {
            try publication.handler(&run)
        } catch {
            connections[connection]!.subscriptions[sub] = nil
            connections[connection]!.subscriptionOrder.removeAll { $0 == sub }
            let ddpError = (error as? DDPError) ?? .meteor(500, "Internal server error")
            if !(error is DDPError) { logger.error("publication failed", metadata: ["ddp.sub": "\(subscription.name)", "error": "\(error)"]) }
            return subscription.universal ? [] : [.nosub(id: sub, error: ddpError)]
        }
        var messages: [ServerMessage] = []
        for cursor in run.cursors {
            observers[cursor.collection, default: []].append(
                Observer(connection: connection, subscription: sub, cursor: cursor, since: database.sequence))
            for (id, document) in database.find(cursor.collection, cursor.selector) {
                if let message = subscriptionAdded(connection, sub, cursor.collection, id, cursor.project(document)) { messages.append(message) }
            }
        }
        for document in run.documents {
            if let message = subscriptionAdded(connection, sub, document.collection, document.id, document.fields) { messages.append(message) }
        }
        if run.isReady {
            connections[connection]!.subscriptions[sub]!.ready = true
            if !subscription.universal { messages.append(.ready(subs: [sub])) }
        }
        if let body = run.task {
            let handle = SubscriptionHandle(core: self, connection: connection, subscription: sub)
            connections[connection]!.subscriptions[sub]!.task = Task { await body(handle) }
        }
        return messages
    }

    /// Stops a subscription's live parts and withdraws its documents; returns the messages.
    func stop(_ connection: Int, _ sub: String) -> [ServerMessage] {
        guard let subscription = connections[connection]?.subscriptions[sub] else { return [] }
        subscription.task?.cancel()
        for (name, list) in observers where list.contains(where: { $0.connection == connection && $0.subscription == sub }) {
            observers[name]!.removeAll { $0.connection == connection && $0.subscription == sub }
        }
        var messages: [ServerMessage] = []
        for (collection, ids) in subscription.documents.sorted(by: { $0.key < $1.key }) {
            let ordered = database.collections[collection].map { store in store.order.filter(ids.contains) } ?? []
            for id in ordered + ids.subtracting(ordered).sorted() {
                if let message = connections[connection]!.mergeBox.removed(sub: sub, collection, id) { messages.append(message) }
            }
        }
        connections[connection]!.subscriptions[sub]!.documents = [:]
        connections[connection]!.subscriptions[sub]!.task = nil
        return messages
    }

    /// Data from a custom publication's background task.
    func publish(_ connection: Int, _ sub: String, _ messages: [ServerMessage]) {
        guard connections[connection]?.subscriptions[sub] != nil else { return }
        defer { stateChanged() }
        for message in messages {
            let out: ServerMessage?
            switch message {
            case .added(let collection, let id, let fields):
                out = subscriptionAdded(connection, sub, collection, id, fields)
            case .changed(let collection, let id, let fields, let cleared):
                out = connections[connection]!.mergeBox.changed(sub: sub, collection, id, fields: fields, cleared: cleared)
            case .removed(let collection, let id):
                out = subscriptionRemoved(connection, sub, collection, id)
            default:
                out = nil
            }
            if let out { send(connection, out) }
        }
    }

    func markReady(_ connection: Int, _ sub: String) {
        guard let subscription = connections[connection]?.subscriptions[sub], !subscription.ready else { return }
        connections[connection]!.subscriptions[sub]!.ready = true
        if !subscription.universal { send(connection, .ready(subs: [sub])) }
        stateChanged()
    }

    /// Meteor's `_setUserId`: re-runs every subscription as the new user and sends only the
    /// difference, then `ready` for each named subscription.
    func setUser(_ connection: Int, _ userId: String?) {
        guard connections[connection] != nil else { return }
        let before = connections[connection]!.mergeBox.visibleCache
        let order = connections[connection]!.subscriptionOrder
        for key in Array(connections[connection]!.subscriptions.keys) {
            _ = stop(connection, key)
        }
        connections[connection]!.mergeBox = MergeBox()
        connections[connection]!.userId = userId
        let named = connections[connection]!.subscriptions.filter { !$0.value.universal }
        connections[connection]!.subscriptions = [:]
        connections[connection]!.subscriptionOrder = []
        startUniversalSubscriptions(connection, silently: true)
        var followUps: [ServerMessage] = []
        for id in order {
            guard let old = named[id], let publication = configuration.publications[old.name] else { continue }
            connections[connection]!.subscriptions[id] = Subscription(name: old.name, params: old.params, universal: false)
            connections[connection]!.subscriptionOrder.append(id)
            for message in run(publication, connection, id) {
                switch message {
                case .ready, .nosub: followUps.append(message)
                default: break
                }
            }
        }
        let after = connections[connection]!.mergeBox.visibleCache
        for change in DocumentCache.difference(from: before, to: after) {
            switch change.change {
            case .added(let collection, let id, let fields): send(connection, .added(collection: collection, id: id, fields: fields))
            case .changed(let collection, let id, let fields, let cleared, _):
                send(connection, .changed(collection: collection, id: id, fields: fields, cleared: cleared))
            case .removed(let collection, let id, _): send(connection, .removed(collection: collection, id: id))
            case .moved: break
            }
        }
        for message in followUps { send(connection, message) }
    }
}
