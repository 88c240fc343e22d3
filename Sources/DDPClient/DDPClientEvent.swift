public import DDP

/// What a DDP client tells its owner, in the order it happened.
public enum DDPClientEvent: Sendable, Equatable {
    case stateChanged(ConnectionState)
    /// Changes to the merged view, each with the document after it (`nil` once removed).
    case documentsChanged([DocumentChange], documents: [EJSONObject?])
    case subscriptionReady(id: String)
    case subscriptionStopped(id: String, error: DDPError?)
    case userChanged(userId: String?)
    /// After a reconnect the stored resume token was refused; the connection is anonymous now.
    case resumeRefused(DDPError)
    case protocolError(reason: String)
}
