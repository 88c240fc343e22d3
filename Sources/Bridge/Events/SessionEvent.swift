public import DDP
public import NIOCore

/// One event of a session's stream, encoded once as a Server-Sent Events frame and shared
/// by every stream that delivers it.
public struct SessionEvent: Sendable {
    public enum Kind: String, Sendable {
        case added, changed, removed, moved, ready, nosub, connection, user, reset
    }

    public let id: UInt64
    public let kind: Kind
    /// For document events: where, and the document afterwards (live queries need it).
    public let collection: String?
    public let documentID: String?
    public let document: EJSONObject?
    /// The `data:` payload.
    public let payload: EJSON
    /// `id: …\nevent: …\ndata: …\n\n`, in a buffer every stream writes as it is (NIO buffers
    /// are shared by reference: 10,000 readers of a change write the same bytes).
    public let frame: ByteBuffer

    public init(id: UInt64, kind: Kind, payload: EJSON, collection: String? = nil, documentID: String? = nil, document: EJSONObject? = nil) {
        self.id = id
        self.kind = kind
        self.payload = payload
        self.collection = collection
        self.documentID = documentID
        self.document = document
        self.frame = ByteBuffer(bytes: SSEFrame.encode(id: id, event: kind.rawValue, data: payload))
    }

    private init(_ event: SessionEvent, payload: EJSON) {
        (id, kind, collection, documentID, document, frame) = (event.id, event.kind, event.collection, event.documentID, event.document, event.frame)
        self.payload = payload
    }

    /// The event as the log keeps it: without its payload tree (the frame has it, encoded), which
    /// was most of an event's memory.
    var withoutPayload: SessionEvent { SessionEvent(self, payload: .null) }

    /// The event for a document change, with the payload the README and openapi.yaml give.
    public static func document(_ change: DocumentChange, document: EJSONObject?, id: UInt64) -> SessionEvent {
        let (kind, payload) = documentPayload(change)
        return SessionEvent(id: id, kind: kind, payload: payload, collection: change.collection, documentID: change.id, document: document)
    }

    /// A document change's kind and `data:` payload, for those that encode the frame themselves
    /// (a snapshot's documents, which carry no id).
    static func documentPayload(_ change: DocumentChange) -> (kind: Kind, payload: EJSON) {
        let idValue = (try? DocumentID(wire: change.id).ejson) ?? .string(change.id)
        let payload: EJSON
        let kind: Kind
        switch change {
        case .added(let c, _, let fields):
            kind = .added
            payload = ["collection": .string(c), "id": idValue, "fields": .object(fields)]
        case .changed(let c, _, let fields, let cleared, let previous):
            kind = .changed
            payload = [
                "collection": .string(c), "id": idValue, "fields": .object(fields),
                "cleared": .array(cleared.map(EJSON.string)), "previous": .object(previous)
            ]
        case .removed(let c, _, let previous):
            kind = .removed
            payload = ["collection": .string(c), "id": idValue, "previous": .object(previous)]
        case .moved(let c, _, let before):
            kind = .moved
            payload = [
                "collection": .string(c), "id": idValue,
                "before": before.map { (try? DocumentID(wire: $0).ejson) ?? .string($0) } ?? .null
            ]
        }
        return (kind, payload)
    }
}
