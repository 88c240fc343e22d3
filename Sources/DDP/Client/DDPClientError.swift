/// A call or a subscription that ended for a cause on this side of the wire: the connection
/// closed, a deadline passed, the upstream's message was over the size limit, a limit the owner
/// keeps stopped a subscription. The server's own errors are ``DDPError``; the two never share
/// a type, so an owner maps causes by ``code``, never by matching strings.
public struct DDPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The cause, as a closed set the owner can switch over through its static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case timedOut = "timed-out"
            case cancelled
            case connectionClosed = "connection-closed"
            case messageTooLarge = "message-too-large"
            case subscriptionStopped = "subscription-stopped"
            case tooManyDocuments = "too-many-documents"
            case memoryBudgetExhausted = "memory-budget-exhausted"
            case memoryShareExhausted = "memory-share-exhausted"
            case loginLost = "login-lost"
        }

        fileprivate let base: Base

        /// The call had no answer within its deadline.
        public static let timedOut = Code(base: .timedOut)
        /// The caller stopped waiting.
        public static let cancelled = Code(base: .cancelled)
        /// The connection was closed for good (by its owner) before the answer came.
        public static let connectionClosed = Code(base: .connectionClosed)
        /// The upstream sent a message over the size limit while this was under way.
        public static let messageTooLarge = Code(base: .messageTooLarge)
        /// The subscription is not active, or stopped without an error before it was ready.
        public static let subscriptionStopped = Code(base: .subscriptionStopped)
        /// The connection's document limit stopped the subscription while it loaded.
        public static let tooManyDocuments = Code(base: .tooManyDocuments)
        /// The owner's memory budget, in all, stopped the subscription while it loaded.
        public static let memoryBudgetExhausted = Code(base: .memoryBudgetExhausted)
        /// The owner's memory share for one address stopped the subscription while it loaded.
        public static let memoryShareExhausted = Code(base: .memoryShareExhausted)
        /// The connection's login was refused after a reconnect, and its owner does not go on
        /// without it (``DDPClientConfiguration/closesWhenLoginIsLost``): the connection closed.
        public static let loginLost = Code(base: .loginLost)

        /// The code as it is reported (an SSE `nosub` event's `error`, an HTTP error's code).
        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened, for people.
    public let reason: String
    public let details: EJSON?

    public init(_ code: Code, _ reason: String, details: EJSON? = nil) {
        self.code = code
        self.reason = reason
        self.details = details
    }

    public static let timedOut = DDPClientError(.timedOut, "the upstream did not answer in time")
    public static let cancelled = DDPClientError(.cancelled, "the call was cancelled")
    public static func connectionClosed(_ reason: String) -> DDPClientError { DDPClientError(.connectionClosed, reason) }

    /// The login is lost: the upstream refused its resume token (`refusal`, kept in `details`
    /// as `upstream`) after a reconnect.
    public static func loginLost(_ refusal: DDPError) -> DDPClientError {
        let cause = refusal.reason.map { "\($0) [\(refusal.error)]" } ?? "\(refusal.error)"
        return DDPClientError(
            .loginLost, "The login was lost: after a reconnect the upstream refused its resume token (\(cause))",
            details: ["upstream": refusal.ejson])
    }

    public var description: String { "\(reason) [\(code)]" }

    /// In the shape of a Meteor error object (as a `nosub` carries one), so a consumer reads
    /// the server's errors and the bridge's own the same way.
    public var ejson: EJSON {
        var object: EJSONObject = ["isClientSafe": true, "error": .string(code.description), "reason": .string(reason)]
        object["message"] = .string(description)
        if let details { object["details"] = details }
        object["errorType"] = "Meteor.Error"
        return .object(object)
    }
}

/// Why a call or a subscription ended without success: the server's error, or a cause on this
/// side. The state machine reports both in one type; its shell throws the one inside.
public enum DDPFailure: Error, Sendable, Equatable, CustomStringConvertible {
    case server(DDPError)
    case local(DDPClientError)

    /// The error to throw to a caller: a ``DDPError`` or a ``DDPClientError``.
    public var error: any Error {
        switch self {
        case .server(let error): error
        case .local(let error): error
        }
    }

    /// The cause on this side, if it is one.
    public var local: DDPClientError? {
        if case .local(let error) = self { error } else { nil }
    }

    public var ejson: EJSON {
        switch self {
        case .server(let error): error.ejson
        case .local(let error): error.ejson
        }
    }

    public var description: String {
        switch self {
        case .server(let error): error.description
        case .local(let error): error.description
        }
    }
}
