public import DDP
import DDPClient
import Foundation
public import HTTPTypes
public import Hummingbird
import NIOCore

/// An error as every endpoint reports it: `{"error", "reason", "message", "details"}` with
/// an HTTP status, both given by its ``Code`` (Meteor's errors by one documented mapping).
public struct BridgeError: Error, Sendable, HTTPResponseError {
    /// What went wrong: the answer's `error` and its status.
    public let code: Code
    public let reason: String
    public let details: EJSON?
    /// Seconds, for 429 and 503 answers.
    public let retryAfter: Int?
    public let allow: [HTTPRequest.Method]

    public init(_ code: Code, _ reason: String, details: EJSON? = nil, retryAfter: Int? = nil, allow: [HTTPRequest.Method] = []) {
        self.code = code
        self.reason = reason
        self.details = details
        self.retryAfter = retryAfter
        self.allow = allow
    }

    public var status: HTTPResponse.Status { code.status }

    /// The machine-readable code as the answer says it: Meteor's `error` (string or number) or
    /// one of the bridge's own.
    public var error: EJSON { code.ejson }

    public static func badRequest(_ reason: String, details: EJSON? = nil) -> BridgeError {
        BridgeError(.badRequest, reason, details: details)
    }

    public static func notFound(_ reason: String) -> BridgeError { BridgeError(.notFound, reason) }

    public static func upstreamUnavailable(_ reason: String, retryAfter: Int = 5) -> BridgeError {
        BridgeError(.upstreamUnavailable, reason, retryAfter: retryAfter)
    }

    public static let upstreamTimeout = BridgeError(.upstreamTimeout, "The upstream did not answer in time")

    /// 504 `upstream-timeout` naming what was waited for and the limit that ran out (a request's
    /// `timeout`, or the setting it defaults to), with the limit in `details.timeout` (ms).
    static func timedOut(_ what: String, after limit: Duration, given: Bool, setting: String, most: Duration) -> BridgeError {
        let ms = limit.wholeMilliseconds
        let source =
            given
            ? "the request's timeout=\(ms); it may be up to \(most.wholeMilliseconds)"
            : "\(setting); timeout=ms sets it for one request, up to \(most.wholeMilliseconds)"
        return BridgeError(
            .upstreamTimeout, "The upstream did not answer \(what) within \(ms) ms (\(source))", details: ["timeout": .number(Double(ms))])
    }

    /// Meteor's error, passed through with the status ``Code/status`` gives it; Meteor's
    /// `too-many-requests` gets `Retry-After` from its `timeToReset`.
    public static func from(_ error: DDPError) -> BridgeError {
        let reason = error.reason ?? error.message ?? "\(error.error)"
        var retryAfter: Int?
        if error.error == .string("too-many-requests") {
            retryAfter = retryAfterSeconds(milliseconds: error.details?["timeToReset"]?.numberValue)
        }
        return BridgeError(.meteor(error.error), reason, details: error.details, retryAfter: retryAfter)
    }

    /// A cause on the bridge's side of the upstream (``DDP/DDPClientError``) → HTTP, by its code;
    /// the answer's `error` is the cause's code, as the same cause reads in a stream's `nosub`
    /// event (but `timed-out` and `cancelled`, which are `upstream-timeout` and `upstream-unavailable`).
    public static func from(_ error: DDPClientError) -> BridgeError {
        let code: Code
        var retryAfter: Int?
        switch error.code {
        case .timedOut:
            return upstreamTimeout
        case .cancelled:
            return upstreamUnavailable(error.reason)
        case .connectionClosed:
            // The bridge's own client gave up on the call (its connection closed): not the caller's fault.
            code = .connectionClosed
            retryAfter = 1
        case .messageTooLarge:
            // The upstream sent more than the bridge accepts in one message: not the caller's fault.
            code = .messageTooLarge
        case .tooManyDocuments:
            // The session's document limit (`--session-max-documents`) stopped the subscription.
            code = .tooManyDocuments
        case .memoryBudgetExhausted:
            // The process's memory budget stopped the subscription while it loaded.
            code = .memoryBudgetExhausted
            retryAfter = 30
        case .memoryShareExhausted:
            code = .memoryShareExhausted
            retryAfter = 30
        case .loginLost:
            // The session's login no longer holds upstream: it ended; log in again (a new session).
            code = .loginLost
        case .subscriptionStopped:
            // The subscription is not there to wait for.
            code = .subscriptionStopped
        default:
            // A cause added to DDPClientError without a code here (BridgeErrorCodeTests lists them).
            code = .internalError
        }
        return BridgeError(code, error.reason, details: error.details, retryAfter: retryAfter)
    }

    /// `Retry-After` from a time in milliseconds that came from outside (Meteor's `timeToReset`):
    /// non-finite, negative or absurd values never trap; the answer is 1 s to one day.
    static func retryAfterSeconds(milliseconds: Double?) -> Int {
        guard let milliseconds, milliseconds.isFinite else { return 1 }
        let seconds = (milliseconds / 1000).rounded(.up)
        return Int(min(max(seconds, 1), 86_400))
    }

    /// Any error thrown while serving a request, as the bridge reports it.
    public static func from(_ error: any Error) -> BridgeError {
        switch error {
        case let error as BridgeError: return error
        case let error as DDPError: return from(error)
        case let error as DDPClientError: return from(error)
        case is NIOTooManyBytesError:
            return BridgeError(.bodyTooLarge, "The request body is larger than the limit")
        case let error as HTTPError:
            switch error.status {
            case .contentTooLarge: return BridgeError(.bodyTooLarge, "The request body is larger than the limit")
            case .notFound: return BridgeError(.notFound, "No such route")
            default: return BridgeError(.httpError(error.status), error.body ?? error.status.reasonPhrase)
            }
        default:
            return BridgeError(.internalError, "Internal error")
        }
    }

    public var message: String { "\(reason) [\(code)]" }

    public var body: EJSON {
        var o: EJSONObject = ["error": error, "reason": .string(reason), "message": .string(message)]
        o["details"] = details ?? .null
        return .object(o)
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [:]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        if !allow.isEmpty { headers[.allow] = allow.map(\.rawValue).joined(separator: ", ") }
        return Reply.json(body, status: status, headers: headers)
    }
}
