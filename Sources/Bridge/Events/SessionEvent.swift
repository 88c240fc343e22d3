public import DDP

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
    /// `id: …\nevent: …\ndata: …\n\n`.
    public let frame: [UInt8]

    public init(id: UInt64, kind: Kind, payload: EJSON, collection: String? = nil, documentID: String? = nil, document: EJSONObject? = nil) {
        self.id = id
        self.kind = kind
        self.payload = payload
        self.collection = collection
        self.documentID = documentID
        self.document = document
        self.frame = SSEFrame.encode(id: id, event: kind.rawValue, data: payload)
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
        return SessionEvent(id: id, kind: kind, payload: payload, collection: change.collection, documentID: change.id, document: document)
    }
}

/// The Server-Sent Events wire format.
public enum SSEFrame {
    public static func encode(id: UInt64?, event: String, data: EJSON) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96)
        if let id {
            EJSONWriter.appendLiteral("id: ", to: &out)
            EJSONWriter.writeInteger(Int64(id), into: &out)
            out.append(0x0A)
        }
        EJSONWriter.appendLiteral("event: ", to: &out)
        out.append(contentsOf: event.utf8)
        EJSONWriter.appendLiteral("\ndata: ", to: &out)
        // Compact JSON has no raw newlines (they are escaped in strings), so one data line suffices.
        EJSONWriter.write(data, into: &out)
        EJSONWriter.appendLiteral("\n\n", to: &out)
        return out
    }

    /// A comment line: heartbeats that keep proxies from closing idle streams.
    public static let heartbeat: [UInt8] = Array(": ping\n\n".utf8)

    /// The reconnection delay hint, sent first.
    public static func retry(milliseconds: Int) -> [UInt8] { Array("retry: \(milliseconds)\n\n".utf8) }
}
