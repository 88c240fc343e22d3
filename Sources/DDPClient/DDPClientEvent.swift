public import DDP

/// What a DDP client tells its owner, in the order it happened.
public enum DDPClientEvent: Sendable, Equatable {
    case stateChanged(ConnectionState)
    /// Changes to the merged view, each as the cache made it (with the document before and after).
    case documentsChanged([AppliedChange])
    case subscriptionReady(id: String)
    case subscriptionStopped(id: String, error: DDPFailure?)
    /// The connection's login (its user and resume token) changed; `nil`: logged out. Any
    /// login-shaped method result counts (``DDP/DDPConnectionStateMachine/Action/loginChanged(_:)``).
    case loginChanged(LoginResult?)
    /// After a reconnect the stored resume token was refused; the connection is anonymous now,
    /// or closed (``DDP/DDPClientConfiguration/closesWhenLoginIsLost``).
    case resumeRefused(DDPError)
    case protocolError(reason: String)
}

/// Where a ``DDPClient`` delivers its events: the delivery contract, as a type.
///
/// `receive` is synchronous and takes the client `isolated`, so the compiler holds it to the
/// contract: it runs on the client's actor, one event at a time in the order they happened,
/// and cannot suspend. Nothing the client does can come between an event and its delivery,
/// and there is no buffer in between: when ``DDPClient/withCache(_:)`` runs, every change
/// already in the cache has been delivered, and none after it. An owner that reads the cache
/// and registers a reader in one step (as a session does for a stream's snapshot) therefore
/// neither misses nor doubles an event (docs/ARCHITECTURE.md, "One event, hop by hop").
public protocol DDPClientEventSink: Sendable {
    func receive(_ event: DDPClientEvent, on client: isolated DDPClient)
}

/// A sink that drops every event (a client whose owner only calls and reads).
public struct DiscardingEventSink: DDPClientEventSink {
    public init() {}
    public func receive(_ event: DDPClientEvent, on client: isolated DDPClient) {}
}

/// A sink made of a closure, for tools and tests; the closure runs under the same contract.
public struct ClosureEventSink: DDPClientEventSink {
    let body: @Sendable (DDPClientEvent) -> Void
    public init(_ body: @escaping @Sendable (DDPClientEvent) -> Void) { self.body = body }
    public func receive(_ event: DDPClientEvent, on client: isolated DDPClient) { body(event) }
}
