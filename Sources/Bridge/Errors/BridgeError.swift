public import DDP
import DDPClient
import Foundation
public import HTTPTypes
public import Hummingbird
import NIOCore

/// An error as every endpoint reports it: `{"error", "reason", "message", "details"}` with
/// an HTTP status, built from Meteor errors by one documented mapping.
public struct BridgeError: Error, Sendable, HTTPResponseError {
    public let status: HTTPResponse.Status
    /// A machine-readable code: Meteor's `error` (string or number) or one of the bridge's own.
    public let error: EJSON
    public let reason: String
    public let details: EJSON?
    /// Seconds, for 429 and 503 answers.
    public let retryAfter: Int?
    public let allow: [HTTPRequest.Method]

    public init(
        _ status: HTTPResponse.Status, _ error: String, _ reason: String, details: EJSON? = nil, retryAfter: Int? = nil,
        allow: [HTTPRequest.Method] = []
    ) {
        self.status = status
        self.error = .string(error)
        self.reason = reason
        self.details = details
        self.retryAfter = retryAfter
        self.allow = allow
    }

    init(status: HTTPResponse.Status, error: EJSON, reason: String, details: EJSON?, retryAfter: Int?) {
        self.status = status
        self.error = error
        self.reason = reason
        self.details = details
        self.retryAfter = retryAfter
        self.allow = []
    }

    public static func badRequest(_ reason: String, details: EJSON? = nil) -> BridgeError {
        BridgeError(.badRequest, "bad-request", reason, details: details)
    }

    public static func notFound(_ reason: String) -> BridgeError { BridgeError(.notFound, "not-found", reason) }

    public static func unauthorized(_ error: String, _ reason: String) -> BridgeError { BridgeError(.unauthorized, error, reason) }

    public static func upstreamUnavailable(_ reason: String, retryAfter: Int = 5) -> BridgeError {
        BridgeError(.serviceUnavailable, "upstream-unavailable", reason, retryAfter: retryAfter)
    }

    public static let upstreamTimeout = BridgeError(.gatewayTimeout, "upstream-timeout", "The upstream did not answer in time")

    /// Meteor's error → HTTP: a numeric code in 400–599 is the status; `too-many-requests` is
    /// 429 with `Retry-After`; `not-authorized`/`forbidden`/`access-denied` are 403; `not-found`
    /// is 404; other string codes are 400 (a client-safe application error); others 500.
    public static func from(_ error: DDPError) -> BridgeError {
        let reason = error.reason ?? error.message ?? "\(error.error)"
        let status: HTTPResponse.Status
        var retryAfter: Int?
        switch error.error {
        case .number(let code) where (400...599).contains(code):
            status = HTTPResponse.Status(code: code)
        case .number:
            status = .internalServerError
        case .string("too-many-requests"):
            status = .tooManyRequests
            retryAfter = retryAfterSeconds(milliseconds: error.details?["timeToReset"]?.numberValue)
        case .string("not-authorized"), .string("forbidden"), .string("access-denied"):
            status = .forbidden
        case .string("not-found"):
            status = .notFound
        case .string:
            status = .badRequest
        }
        let code: EJSON =
            switch error.error {
            case .string(let s): .string(s)
            case .number(let n): .int(n)
            }
        return BridgeError(status: status, error: code, reason: reason, details: error.details, retryAfter: retryAfter)
    }

    /// A cause on the bridge's side of the upstream (``DDP/DDPClientError``) → HTTP, by its code;
    /// the code is the answer's `error`, as the same cause reads in a stream's `nosub` event.
    public static func from(_ error: DDPClientError) -> BridgeError {
        let status: HTTPResponse.Status
        var retryAfter: Int?
        switch error.code {
        case .timedOut:
            return upstreamTimeout
        case .cancelled:
            return upstreamUnavailable(error.reason)
        case .connectionClosed:
            // The bridge's own client gave up on the call (its connection closed): not the caller's fault.
            status = .serviceUnavailable
            retryAfter = 1
        case .messageTooLarge:
            // The upstream sent more than the bridge accepts in one message: not the caller's fault.
            status = .badGateway
        case .tooManyDocuments:
            // The session's document limit (`--session-max-documents`) stopped the subscription.
            status = .unprocessableContent
        case .memoryBudgetExhausted:
            // The process's memory budget stopped the subscription while it loaded.
            status = .serviceUnavailable
            retryAfter = 30
        case .memoryShareExhausted:
            status = .tooManyRequests
            retryAfter = 30
        case .loginLost:
            // The session's login no longer holds upstream: it ended; log in again (a new session).
            status = .unauthorized
        default:
            // `subscription-stopped`: the subscription is not there to wait for.
            status = .badRequest
        }
        return BridgeError(
            status: status, error: .string(error.code.description), reason: error.reason, details: error.details, retryAfter: retryAfter)
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
            return BridgeError(.contentTooLarge, "body-too-large", "The request body is larger than the limit")
        case let error as HTTPError:
            switch error.status {
            case .contentTooLarge: return BridgeError(.contentTooLarge, "body-too-large", "The request body is larger than the limit")
            case .notFound: return BridgeError(.notFound, "not-found", "No such route")
            default: return BridgeError(error.status, "http-error", error.body ?? error.status.reasonPhrase)
            }
        default:
            return BridgeError(.internalServerError, "internal-error", "Internal error")
        }
    }

    public var message: String {
        let code = error.stringValue ?? error.intValue.map(String.init) ?? "\(error)"
        return "\(reason) [\(code)]"
    }

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
