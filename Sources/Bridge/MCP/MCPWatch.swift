import DDP
import NIOCore

/// The resources an MCP session has subscribed to (`resources/subscribe`), and what its server
/// stream (`GET /mcp`) makes of the user's session's changes: a
/// `notifications/resources/updated` for each subscribed resource a change reaches. A document
/// resource is reached by a change of that document; a query resource by any change in its
/// collection (the agent reads it again to see whether its answer moved). The stream is an
/// ``EventStream`` of the user's session like any other (its bounds, its loop's feed, its
/// heartbeats); this is its filter and its framing.
final class MCPWatch: Sendable {
    /// The most resources one session may watch.
    static let limit = 100

    private struct Watched: Sendable {
        var resources: [String: MCPResource] = [:]
        var streamOpen = false
    }

    private let watched = LockedState(Watched())

    /// Watches `uri` (again is fine); `false` past ``limit``.
    func add(_ uri: String, _ resource: MCPResource) -> Bool {
        watched.withLock { watched in
            guard watched.resources[uri] != nil || watched.resources.count < Self.limit else { return false }
            watched.resources[uri] = resource
            return true
        }
    }

    func remove(_ uri: String) { watched.withLock { _ = $0.resources.removeValue(forKey: uri) } }

    /// Takes the session's one server stream; `false` when it is open already.
    func openStream() -> Bool {
        watched.withLock { watched in
            defer { watched.streamOpen = true }
            return !watched.streamOpen
        }
    }

    func streamClosed() { watched.withLock { $0.streamOpen = false } }

    /// The stream's frames for one of the session's events: a notification per subscribed
    /// resource it reaches (`nil`: none).
    func frames(for event: SessionEvent) -> ByteBuffer? {
        guard let collection = event.collection, let id = event.documentID else { return nil }
        let uris = watched.withLock { Self.reached(by: collection, id, in: $0.resources) }
        guard !uris.isEmpty else { return nil }
        var bytes: [UInt8] = []
        for uri in uris { bytes += Self.updated(uri) }
        return ByteBuffer(bytes: bytes)
    }

    /// The subscribed resources a change of the document `id` of `collection` reaches, in URI
    /// order. Pure.
    static func reached(by collection: String, _ id: String, in resources: [String: MCPResource]) -> [String] {
        resources.compactMap { uri, resource -> String? in
            switch resource {
            case .document(let c, let documentID): c == collection && documentID.wire == id ? uri : nil
            case .query(let c, _): c == collection ? uri : nil
            }
        }.sorted()
    }

    /// `notifications/resources/updated` for `uri`, as an SSE event (the transport's default
    /// `message` type).
    static func updated(_ uri: String) -> [UInt8] {
        let message = EJSONWriter.encode([
            "jsonrpc": "2.0", "method": "notifications/resources/updated", "params": ["uri": .string(uri)]
        ])
        return Array("data: ".utf8) + message + Array("\n\n".utf8)
    }
}
