/// One change to the merged document view, with what it replaced: the unit SSE streams report.
public enum DocumentChange: Sendable, Equatable {
    case added(collection: String, id: String, fields: EJSONObject)
    /// `fields` holds new values, `cleared` the removed field names, `previous` the old
    /// values of every changed or cleared field that had one.
    case changed(collection: String, id: String, fields: EJSONObject, cleared: [String], previous: EJSONObject)
    /// `previous` is the last known document.
    case removed(collection: String, id: String, previous: EJSONObject)
    /// For ordered collections: the document now stands before `before` (`nil`: at the end).
    case moved(collection: String, id: String, before: String?)

    public var collection: String {
        switch self {
        case .added(let c, _, _), .changed(let c, _, _, _, _), .removed(let c, _, _), .moved(let c, _, _): c
        }
    }

    public var id: String {
        switch self {
        case .added(_, let id, _), .changed(_, let id, _, _, _), .removed(_, let id, _), .moved(_, let id, _): id
        }
    }
}

/// A change as the cache made it, with the document before and after: derived once, where the
/// message is applied, and consumed as it is by everything downstream (the client's owner, the
/// session's batch, the stream events), so no later step reads the document back or diffs again.
public struct AppliedChange: Sendable, Equatable {
    public let change: DocumentChange
    /// The document before the change (`nil`: it was absent).
    public let before: EJSONObject?
    /// The document after the change (`nil`: it is gone).
    public let after: EJSONObject?

    public init(_ change: DocumentChange, before: EJSONObject?, after: EJSONObject?) {
        self.change = change
        self.before = before
        self.after = after
    }

    public var collection: String { change.collection }
    public var id: String { change.id }
}
