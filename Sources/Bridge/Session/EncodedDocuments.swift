import DDP
import NIOCore

/// The encoded `GET /v1/collections/{name}/{id}` bodies a session answered recently, so a
/// document read again costs no hop to the connection's actor and no encoding. Kept in the
/// session's state (under its lock); every change to a document drops its entry, in the same
/// step that delivers the change (``Session/Events``). Bounded in bytes: past the bound the
/// whole table is dropped (documents read again fill it again).
struct EncodedDocuments: Sendable {
    struct Key: Hashable, Sendable {
        let collection: String
        let id: String
    }

    static let byteLimit = 64 * 1024

    private var bodies: [Key: ByteBuffer] = [:]
    private var bytes = 0
    /// Counts every change to the session's documents; an entry encoded from a read made
    /// before the latest change is not kept (the change may have been to that document).
    private(set) var generation: UInt64 = 0

    func body(_ collection: String, _ id: String) -> ByteBuffer? { bodies[Key(collection: collection, id: id)] }

    /// Keeps `body` if no change came since the read it was encoded from (`generation`).
    mutating func keep(_ body: ByteBuffer, _ collection: String, _ id: String, readAt generation: UInt64) {
        guard generation == self.generation, body.readableBytes <= Self.byteLimit / 4 else { return }
        if bytes + body.readableBytes > Self.byteLimit {
            bodies = [:]
            bytes = 0
        }
        if let old = bodies.updateValue(body, forKey: Key(collection: collection, id: id)) { bytes -= old.readableBytes }
        bytes += body.readableBytes
    }

    mutating func changed(_ changes: [AppliedChange]) {
        generation &+= 1
        guard !bodies.isEmpty else { return }
        for change in changes {
            if let old = bodies.removeValue(forKey: Key(collection: change.collection, id: change.id)) { bytes -= old.readableBytes }
        }
    }
}
