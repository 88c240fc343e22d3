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
