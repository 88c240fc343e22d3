/// What the state machine tells its shell (``Action``) and the books it keeps: calls, their
/// blocks, subscriptions and the resync in progress. Its logic is in DDPConnectionStateMachine.swift.
extension DDPConnectionStateMachine {
    /// What the shell must do, or tell its consumers.
    public enum Action: Sendable, Equatable {
        /// Open a WebSocket now, then call ``transportOpened(at:)``.
        case openTransport
        case send(ClientMessage)
        /// Close the WebSocket (dead link, renegotiation); the shell then calls ``transportClosed(at:unit:failure:)``.
        case closeTransport
        /// Call ``reconnectTimerFired()`` after this delay.
        case scheduleReconnect(after: Duration)
        case stateChanged(ConnectionState)
        /// A method's `result` arrived (its data may not be visible yet).
        case methodResult(id: String, outcome: Result<EJSON?, DDPFailure>)
        /// A method has both its `result` and `updated`: its writes are visible in the cache.
        case methodCompleted(id: String, outcome: Result<EJSON?, DDPFailure>)
        case subscriptionReady(id: String)
        case subscriptionStopped(id: String, error: DDPFailure?)
        /// Changes the cache made, each with the document before and after it.
        case documentsChanged([AppliedChange])
        /// The connection's login changed (its user, or its resume token): what the upstream
        /// said in a login-shaped result (`{"id", "token"}`, of any method: `login`,
        /// `createUser`, or another that logs the connection in), or `nil` after `logout` or a
        /// refused resume.
        case loginChanged(LoginResult?)
        /// The resume token was refused after a reconnect: the connection is now anonymous (or,
        /// with ``DDPClientConfiguration/closesWhenLoginIsLost``, closed).
        case resumeRefused(DDPError)
        /// The server reported a protocol error about something this client sent.
        case protocolError(reason: String, offendingMessage: EJSON?)
        /// Something the owner should log: the connection worked around a fault.
        case warning(String)
    }

    enum MethodKind: Sendable, Equatable { case normal, login, logout, resume }

    struct MethodCall: Sendable {
        let id: String
        let name: String
        let params: [EJSON]
        let options: MethodOptions
        let kind: MethodKind
        var sentOnThisConnection = false
        var outcome: Result<EJSON?, DDPFailure>? = nil
        var dataVisible = false

        var message: ClientMessage {
            .method(id: id, method: name, params: params, randomSeed: options.randomSeed.map(EJSON.string))
        }
    }

    /// Meteor's `_outstandingMethodBlocks`: only the first block is on the wire; a `wait`
    /// method has a block of its own.
    struct MethodBlock: Sendable {
        var wait: Bool
        var methods: [String]
    }

    public struct Subscription: Sendable, Equatable {
        public let id: String
        public let name: String
        public let params: [EJSON]
        public internal(set) var ready: Bool
    }

    /// State kept while waiting for quiescence after a reconnect (docs/ARCHITECTURE.md: "Reconnecting").
    struct Reset: Sendable {
        let startedAt: Instant
        var shadow = DocumentCache()
        var subsBeingRevived: Set<String>
        var methodsBlocking: Set<String>
        var deferred: [Action] = []
    }

    enum Phase: Sendable, Equatable {
        case idle
        case connecting
        case connected
        case waitingToReconnect
        case closed
    }
}
