public import DDP

/// A query a publication publishes and keeps live, like returning a cursor in Meteor.
public struct Cursor: Sendable {
    public var collection: String
    public var selector: Selector
    /// Only these top-level fields are published (`nil`: all but those in `excludedFields`).
    public var fields: [String]?
    public var excludedFields: [String]

    public init(_ collection: String, selector: Selector = .everything, fields: [String]? = nil, excludedFields: [String] = []) {
        self.collection = collection
        self.selector = selector
        self.fields = fields
        self.excludedFields = excludedFields
    }

    /// The published fields of a stored document (never `_id`, which travels as the message's id).
    func project(_ document: EJSONObject) -> EJSONObject {
        var out = EJSONObject()
        for field in document where field.key != "_id" {
            if let fields, !fields.contains(field.key) { continue }
            if excludedFields.contains(field.key) { continue }
            out[field.key] = field.value
        }
        return out
    }
}

/// What one run of a publication asks for: live cursors, documents, readiness and a
/// background task for custom data (a ticker).
public struct PublicationRun: Sendable {
    public let userId: String?
    public let params: [EJSON]
    var cursors: [Cursor] = []
    var documents: [(collection: String, id: String, fields: EJSONObject)] = []
    var isReady = false
    var task: (@Sendable (SubscriptionHandle) async -> Void)?

    init(userId: String?, params: [EJSON]) {
        self.userId = userId
        self.params = params
    }

    /// Publishes a cursor's documents and follows its changes; a publication with a cursor is ready at once.
    public mutating func publish(_ cursor: Cursor) {
        cursors.append(cursor)
        isReady = true
    }

    public mutating func added(_ collection: String, _ id: String, _ fields: EJSONObject) {
        documents.append((collection, id, fields))
    }

    public mutating func ready() { isReady = true }

    /// Runs `body` while the subscription lives; it is cancelled when the subscription stops.
    public mutating func run(_ body: @escaping @Sendable (SubscriptionHandle) async -> Void) {
        task = body
    }
}

/// A named (or universal) publication. The handler throws ``DDP/DDPError`` to refuse.
public struct Publication: Sendable {
    let handler: @Sendable (inout PublicationRun) throws -> Void

    public init(_ handler: @escaping @Sendable (inout PublicationRun) throws -> Void) {
        self.handler = handler
    }
}

/// The live side of a custom publication: what its background task publishes.
public struct SubscriptionHandle: Sendable {
    let core: ServerCore
    let connection: Int
    let subscription: String

    public func added(_ collection: String, _ id: String, _ fields: EJSONObject) async {
        await core.publish(connection, subscription, [.added(collection: collection, id: id, fields: fields)])
    }

    public func changed(_ collection: String, _ id: String, fields: EJSONObject, cleared: [String] = []) async {
        await core.publish(connection, subscription, [.changed(collection: collection, id: id, fields: fields, cleared: cleared)])
    }

    public func removed(_ collection: String, _ id: String) async {
        await core.publish(connection, subscription, [.removed(collection: collection, id: id)])
    }

    /// Publishes several data messages in one step (high-rate publications).
    public func publish(_ messages: [ServerMessage]) async {
        await core.publish(connection, subscription, messages)
    }

    public func ready() async {
        await core.markReady(connection, subscription)
    }
}
