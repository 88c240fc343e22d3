public import DDP

/// A method's handler: params in, EJSON result out. Throw ``DDP/DDPError`` for errors the
/// client should see; any other error reaches the client as 500 "Internal server error".
public typealias MethodHandler = @Sendable (MethodInvocation, [EJSON]) async throws -> EJSON?

/// What a method can see and do: who calls it, and writes that go through the write fence.
public struct MethodInvocation: Sendable {
    public let userId: String?
    public let connectionID: Int
    public let randomSeed: String?
    /// The caller's address as the WebSocket handshake's `X-Forwarded-For` gave it.
    public let clientAddress: String?
    let core: ServerCore

    /// Inserts a document; without `_id` it gets one (predictable from the method's `randomSeed`).
    public func insert(_ collection: String, _ document: EJSONObject) async throws -> String {
        try await core.insert(collection, document, randomSeed: randomSeed, fenced: true)
    }

    public func update(_ collection: String, _ selector: EJSON, _ modifier: EJSONObject) async throws -> Int {
        try await core.update(collection, selector, modifier, fenced: true)
    }

    public func remove(_ collection: String, _ selector: EJSON) async throws -> Int {
        try await core.remove(collection, selector, fenced: true)
    }

    public func find(_ collection: String, _ selector: EJSON = [:]) async throws -> [EJSONObject] {
        try await core.find(collection, selector)
    }
}
