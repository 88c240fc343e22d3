public import DDP
public import HTTPTypes

extension BridgeError {
    /// What an answer's `error` says, and so its HTTP status: one of the bridge's own causes, or
    /// the Meteor app's own error passed through (``meteor(_:)``).
    ///
    /// The bridge's codes are a closed set that can grow (a struct over a private enum). Each
    /// names its wire name (``description``) and its status in one table; the two codes whose
    /// status is another answer's (``httpError(_:)``, ``subscriptionFailed(_:)``) carry it.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: Sendable, Hashable {
            case own(Own)
            /// Hummingbird's error (a status it chose), as `http-error`.
            case httpError(HTTPResponse.Status)
            /// A group of subscriptions failed: the status of its first failure.
            case subscriptionFailed(HTTPResponse.Status)
            /// Meteor's own `error` (a string or a number), passed through.
            case meteor(DDPError.Code)
        }

        /// The bridge's codes whose status never varies.
        fileprivate enum Own: Sendable, Hashable, CaseIterable {
            case badRequest, invalidParams, notFound, methodNotAllowed
            case bodyTooLarge, paramsTooLarge, uriTooLong, requestHeaderTooLarge, queryTooExpensive
            case noSession, invalidSession, sessionExpired, invalidLoginToken, queryTokenNotAllowed, loginLost
            case originNotAllowed, cookieWriteNotJSON, notPublic, sessionKeyedByToken
            case tooManyRequests, tooManySessions, tooManySessionsFromAddress, tooManyStreams, tooManySubscriptions
            case tooManyPublicReaders, tooManyPublicStreams, tooManyPublicSubscriptions, tooManyPublicSubscriptionsFromAddress
            case tooManyConnections, tooManyConnectionsFromAddress
            case tooManyDocuments, memoryBudgetExhausted, memoryShareExhausted
            case upstreamUnavailable, upstreamTimeout, connectionClosed, messageTooLarge, subscriptionStopped
            case shuttingDown, sessionStoreUnavailable, sessionKeyMismatch, internalError, slowConsumer, sessionEnded

            /// The table: each code's wire name and status.
            var entry: (name: String, status: HTTPResponse.Status) {
                switch self {
                case .badRequest: ("bad-request", .badRequest)
                case .invalidParams: ("invalid-params", .badRequest)
                case .notFound: ("not-found", .notFound)
                case .methodNotAllowed: ("method-not-allowed", .methodNotAllowed)
                case .bodyTooLarge: ("body-too-large", .contentTooLarge)
                case .paramsTooLarge: ("params-too-large", .contentTooLarge)
                case .uriTooLong: ("uri-too-long", .uriTooLong)
                case .requestHeaderTooLarge: ("request-header-too-large", .requestHeaderFieldsTooLarge)
                case .queryTooExpensive: ("query-too-expensive", .unprocessableContent)
                case .noSession: ("no-session", .unauthorized)
                case .invalidSession: ("invalid-session", .unauthorized)
                case .sessionExpired: ("session-expired", .unauthorized)
                case .invalidLoginToken: ("invalid-login-token", .unauthorized)
                case .queryTokenNotAllowed: ("query-token-not-allowed", .unauthorized)
                case .loginLost: ("login-lost", .unauthorized)
                case .originNotAllowed: ("origin-not-allowed", .forbidden)
                case .cookieWriteNotJSON: ("cookie-write-not-json", .forbidden)
                case .notPublic: ("not-public", .forbidden)
                case .sessionKeyedByToken: ("session-keyed-by-token", .conflict)
                case .tooManyRequests: ("too-many-requests", .tooManyRequests)
                case .tooManySessions: ("too-many-sessions", .serviceUnavailable)
                case .tooManySessionsFromAddress: ("too-many-sessions", .tooManyRequests)
                case .tooManyStreams: ("too-many-streams", .tooManyRequests)
                case .tooManySubscriptions: ("too-many-subscriptions", .tooManyRequests)
                case .tooManyPublicReaders: ("too-many-public-readers", .serviceUnavailable)
                case .tooManyPublicStreams: ("too-many-public-streams", .tooManyRequests)
                case .tooManyPublicSubscriptions: ("too-many-public-subscriptions", .serviceUnavailable)
                case .tooManyPublicSubscriptionsFromAddress: ("too-many-public-subscriptions-from-address", .tooManyRequests)
                case .tooManyConnections: ("too-many-connections", .serviceUnavailable)
                case .tooManyConnectionsFromAddress: ("too-many-connections-from-address", .tooManyRequests)
                case .tooManyDocuments: ("too-many-documents", .unprocessableContent)
                case .memoryBudgetExhausted: ("memory-budget-exhausted", .serviceUnavailable)
                case .memoryShareExhausted: ("memory-share-exhausted", .tooManyRequests)
                case .upstreamUnavailable: ("upstream-unavailable", .serviceUnavailable)
                case .upstreamTimeout: ("upstream-timeout", .gatewayTimeout)
                case .connectionClosed: ("connection-closed", .serviceUnavailable)
                case .messageTooLarge: ("message-too-large", .badGateway)
                case .subscriptionStopped: ("subscription-stopped", .badRequest)
                case .shuttingDown: ("shutting-down", .serviceUnavailable)
                case .sessionStoreUnavailable: ("session-store-unavailable", .serviceUnavailable)
                case .sessionKeyMismatch: ("session-key-mismatch", .serviceUnavailable)
                case .internalError: ("internal-error", .internalServerError)
                // A stream's last event only (its status is never sent: the stream answered 200).
                case .slowConsumer: ("slow-consumer", .tooManyRequests)
                case .sessionEnded: ("session-ended", .unauthorized)
                }
            }
        }

        fileprivate let base: Base

        private init(base: Base) { self.base = base }

        private init(_ own: Own) { base = .own(own) }

        // MARK: Input

        /// Malformed input; the reason says what is wrong.
        public static let badRequest = Code(.badRequest)
        /// A public publication's parameters are not the ones it takes.
        public static let invalidParams = Code(.invalidParams)
        /// No such route, document or subscription.
        public static let notFound = Code(.notFound)
        /// A known path that does not take this verb (with `Allow`).
        public static let methodNotAllowed = Code(.methodNotAllowed)
        /// The body is over `--max-body-size`.
        public static let bodyTooLarge = Code(.bodyTooLarge)
        /// A subscription's name and params are over `--max-subscription-params-size`.
        public static let paramsTooLarge = Code(.paramsTooLarge)
        /// The request's path and query are over 64 KiB.
        public static let uriTooLong = Code(.uriTooLong)
        /// The request line or its headers are over 80 KiB.
        public static let requestHeaderTooLarge = Code(.requestHeaderTooLarge)
        /// A query ran past `--query-time-budget` without finishing.
        public static let queryTooExpensive = Code(.queryTooExpensive)

        // MARK: Who is asking

        /// The request carries no credential.
        public static let noSession = Code(.noSession)
        /// The session token is not one the bridge knows.
        public static let invalidSession = Code(.invalidSession)
        /// The session has ended.
        public static let sessionExpired = Code(.sessionExpired)
        /// The upstream refused a Meteor login token.
        public static let invalidLoginToken = Code(.invalidLoginToken)
        /// A token in the query string of a request other than `GET`.
        public static let queryTokenNotAllowed = Code(.queryTokenNotAllowed)
        /// The session's login no longer holds upstream: the session ended.
        public static let loginLost = Code(.loginLost)
        /// A write from an `Origin` the bridge does not allow.
        public static let originNotAllowed = Code(.originNotAllowed)
        /// A write authenticated by the session cookie alone that is not JSON.
        public static let cookieWriteNotJSON = Code(.cookieWriteNotJSON)
        /// The publication is not public on this bridge.
        public static let notPublic = Code(.notPublic)
        /// A login on a session keyed by a Meteor login token, which stays that token's user.
        public static let sessionKeyedByToken = Code(.sessionKeyedByToken)

        // MARK: Limits

        /// The bridge's own rate limit (Meteor's is passed through as ``meteor(_:)``).
        public static let tooManyRequests = Code(.tooManyRequests)
        /// The bridge holds its maximum of sessions (503).
        public static let tooManySessions = Code(.tooManySessions)
        /// The address holds its maximum of sessions: 429, and on the wire `too-many-sessions`
        /// like the bridge's limit (the status tells the two apart).
        public static let tooManySessionsFromAddress = Code(.tooManySessionsFromAddress)
        /// The session has its maximum of open streams.
        public static let tooManyStreams = Code(.tooManyStreams)
        /// The session holds its maximum of subscriptions.
        public static let tooManySubscriptions = Code(.tooManySubscriptions)
        /// The bridge serves its maximum of public streams.
        public static let tooManyPublicReaders = Code(.tooManyPublicReaders)
        /// The address has its maximum of public streams open.
        public static let tooManyPublicStreams = Code(.tooManyPublicStreams)
        /// The bridge holds its maximum of distinct public subscriptions.
        public static let tooManyPublicSubscriptions = Code(.tooManyPublicSubscriptions)
        /// The address made its maximum of distinct public subscriptions.
        public static let tooManyPublicSubscriptionsFromAddress = Code(.tooManyPublicSubscriptionsFromAddress)
        /// The bridge holds its maximum of client connections.
        public static let tooManyConnections = Code(.tooManyConnections)
        /// The address holds its maximum of client connections.
        public static let tooManyConnectionsFromAddress = Code(.tooManyConnectionsFromAddress)
        /// The session's document limit stopped the subscription.
        public static let tooManyDocuments = Code(.tooManyDocuments)
        /// The process's memory budget stopped the subscription.
        public static let memoryBudgetExhausted = Code(.memoryBudgetExhausted)
        /// The address's share of the memory budget stopped the subscription.
        public static let memoryShareExhausted = Code(.memoryShareExhausted)

        // MARK: The upstream and the bridge

        /// The upstream cannot be reached (or the bridge is stopping).
        public static let upstreamUnavailable = Code(.upstreamUnavailable)
        /// The upstream did not answer in time.
        public static let upstreamTimeout = Code(.upstreamTimeout)
        /// The session's upstream connection closed while the call waited.
        public static let connectionClosed = Code(.connectionClosed)
        /// The upstream sent a message over the bridge's size limit.
        public static let messageTooLarge = Code(.messageTooLarge)
        /// The subscription is not there to wait for.
        public static let subscriptionStopped = Code(.subscriptionStopped)
        /// The bridge is shutting down.
        public static let shuttingDown = Code(.shuttingDown)
        /// The session store does not answer for a session not held here.
        public static let sessionStoreUnavailable = Code(.sessionStoreUnavailable)
        /// The session was sealed with another session key than this bridge's.
        public static let sessionKeyMismatch = Code(.sessionKeyMismatch)
        /// Anything else: the log has the cause, the answer does not.
        public static let internalError = Code(.internalError)
        /// A stream fell further behind than its buffer (its last event).
        public static let slowConsumer = Code(.slowConsumer)
        /// The stream's session ended (its last event).
        public static let sessionEnded = Code(.sessionEnded)

        // MARK: Codes that carry their status

        /// An error Hummingbird raised with its own status (`http-error`).
        public static func httpError(_ status: HTTPResponse.Status) -> Code { Code(base: .httpError(status)) }

        /// A group of subscriptions of which some failed (`subscription-failed`): the status of
        /// the first failure.
        public static func subscriptionFailed(_ status: HTTPResponse.Status) -> Code { Code(base: .subscriptionFailed(status)) }

        /// The Meteor app's own `error`, passed through as it came: its status by the one mapping
        /// (``status``).
        public static func meteor(_ code: DDPError.Code) -> Code { Code(base: .meteor(code)) }

        /// Every code whose status never varies (for tests of the table).
        static var fixed: [Code] { Own.allCases.map(Code.init) }

        /// The HTTP status of an answer with this code. For Meteor's errors: a numeric code in
        /// 400–599 is the status (other numbers 500); `too-many-requests` is 429;
        /// `not-authorized`, `forbidden` and `access-denied` are 403; `not-found` is 404; other
        /// string codes are 400 (a client-safe application error).
        public var status: HTTPResponse.Status {
            switch base {
            case .own(let own): own.entry.status
            case .httpError(let status), .subscriptionFailed(let status): status
            case .meteor(.number(let code)) where (400...599).contains(code): HTTPResponse.Status(code: code)
            case .meteor(.number): .internalServerError
            case .meteor(.string("too-many-requests")): .tooManyRequests
            case .meteor(.string("not-authorized")), .meteor(.string("forbidden")), .meteor(.string("access-denied")): .forbidden
            case .meteor(.string("not-found")): .notFound
            case .meteor(.string): .badRequest
            }
        }

        /// The code as the answer's `error` says it (a Meteor number as its digits).
        public var description: String {
            switch base {
            case .own(let own): own.entry.name
            case .httpError: "http-error"
            case .subscriptionFailed: "subscription-failed"
            case .meteor(let code): code.description
            }
        }

        /// The answer's `error`: a string, or Meteor's number as a number.
        var ejson: EJSON {
            switch base {
            case .meteor(.number(let code)): .int(code)
            default: .string(description)
            }
        }
    }
}
