import DDP
import HTTPTypes
import NIOCore
import Testing

@testable import Bridge

/// The error code table: every code's status and wire name, and the answers built from them,
/// byte for byte what `openapi.yaml` and the clients know.
@Suite struct BridgeErrorCodeTests {
    typealias Code = BridgeError.Code

    /// The table as clients see it. A code added to ``BridgeError/Code`` without a line here fails.
    static let table: [(Code, HTTPResponse.Status, String)] = [
        (.badRequest, .badRequest, "bad-request"),
        (.invalidParams, .badRequest, "invalid-params"),
        (.notFound, .notFound, "not-found"),
        (.methodNotAllowed, .methodNotAllowed, "method-not-allowed"),
        (.bodyTooLarge, .contentTooLarge, "body-too-large"),
        (.paramsTooLarge, .contentTooLarge, "params-too-large"),
        (.uriTooLong, .uriTooLong, "uri-too-long"),
        (.requestHeaderTooLarge, .requestHeaderFieldsTooLarge, "request-header-too-large"),
        (.queryTooExpensive, .unprocessableContent, "query-too-expensive"),
        (.noSession, .unauthorized, "no-session"),
        (.invalidSession, .unauthorized, "invalid-session"),
        (.sessionExpired, .unauthorized, "session-expired"),
        (.invalidLoginToken, .unauthorized, "invalid-login-token"),
        (.queryTokenNotAllowed, .unauthorized, "query-token-not-allowed"),
        (.loginLost, .unauthorized, "login-lost"),
        (.originNotAllowed, .forbidden, "origin-not-allowed"),
        (.cookieWriteNotJSON, .forbidden, "cookie-write-not-json"),
        (.notPublic, .forbidden, "not-public"),
        (.sessionKeyedByToken, .conflict, "session-keyed-by-token"),
        (.tooManyRequests, .tooManyRequests, "too-many-requests"),
        (.tooManySessions, .serviceUnavailable, "too-many-sessions"),
        (.tooManySessionsFromAddress, .tooManyRequests, "too-many-sessions"),
        (.tooManyStreams, .tooManyRequests, "too-many-streams"),
        (.tooManySubscriptions, .tooManyRequests, "too-many-subscriptions"),
        (.tooManyPublicReaders, .serviceUnavailable, "too-many-public-readers"),
        (.tooManyPublicStreams, .tooManyRequests, "too-many-public-streams"),
        (.tooManyPublicSubscriptions, .serviceUnavailable, "too-many-public-subscriptions"),
        (.tooManyPublicSubscriptionsFromAddress, .tooManyRequests, "too-many-public-subscriptions-from-address"),
        (.tooManyConnections, .serviceUnavailable, "too-many-connections"),
        (.tooManyConnectionsFromAddress, .tooManyRequests, "too-many-connections-from-address"),
        (.tooManyDocuments, .unprocessableContent, "too-many-documents"),
        (.memoryBudgetExhausted, .serviceUnavailable, "memory-budget-exhausted"),
        (.memoryShareExhausted, .tooManyRequests, "memory-share-exhausted"),
        (.upstreamUnavailable, .serviceUnavailable, "upstream-unavailable"),
        (.upstreamTimeout, .gatewayTimeout, "upstream-timeout"),
        (.connectionClosed, .serviceUnavailable, "connection-closed"),
        (.messageTooLarge, .badGateway, "message-too-large"),
        (.subscriptionStopped, .badRequest, "subscription-stopped"),
        (.shuttingDown, .serviceUnavailable, "shutting-down"),
        (.sessionStoreUnavailable, .serviceUnavailable, "session-store-unavailable"),
        (.sessionKeyMismatch, .serviceUnavailable, "session-key-mismatch"),
        (.internalError, .internalServerError, "internal-error"),
        (.slowConsumer, .tooManyRequests, "slow-consumer"),
        (.sessionEnded, .unauthorized, "session-ended")
    ]

    @Test func eachCodeHasItsStatusAndWireName() {
        #expect(Set(Self.table.map(\.0)) == Set(Code.fixed), "the table here and the bridge's list the same codes")
        #expect(Self.table.count == Code.fixed.count)
        for (code, status, name) in Self.table {
            #expect(code.status == status, "\(name)")
            #expect(code.description == name)
            #expect(BridgeError(code, "r").body == ["error": .string(name), "reason": "r", "message": .string("r [\(name)]"), "details": nil])
        }
        // One wire name, two causes: the status tells the bridge's limit from the address's, as it always has.
        let names = Self.table.map(\.2)
        #expect(names.count - Set(names).count == 1)
        #expect(Code.tooManySessions != Code.tooManySessionsFromAddress)
    }

    @Test func codesThatCarryTheirStatus() {
        #expect(Code.httpError(.conflict).status == .conflict)
        #expect(Code.httpError(.conflict).description == "http-error")
        #expect(Code.subscriptionFailed(.tooManyRequests).status == .tooManyRequests)
        #expect(Code.subscriptionFailed(.tooManyRequests).description == "subscription-failed")
        #expect(Code.httpError(.conflict) != Code.httpError(.gone))
    }

    /// Meteor's `error` is passed through as it came (a number stays a number) with the
    /// status of the documented mapping.
    @Test func meteorCodesPassThrough() {
        let cases: [(DDPError.Code, HTTPResponse.Status, EJSON)] = [
            (.number(403), .forbidden, 403),
            (.number(409), .conflict, 409),
            (.number(42), .internalServerError, 42),
            (.number(600), .internalServerError, 600),
            (.string("too-many-requests"), .tooManyRequests, "too-many-requests"),
            (.string("not-authorized"), .forbidden, "not-authorized"),
            (.string("forbidden"), .forbidden, "forbidden"),
            (.string("access-denied"), .forbidden, "access-denied"),
            (.string("not-found"), .notFound, "not-found"),
            (.string("validation-error"), .badRequest, "validation-error")
        ]
        for (meteor, status, wire) in cases {
            let error = BridgeError(.meteor(meteor), "why")
            #expect(error.status == status, "\(meteor)")
            #expect(error.error == wire)
            #expect(error.message == "why [\(meteor)]")
        }
        #expect(BridgeError.from(DDPError.meteor(404, "gone")).body == ["error": 404, "reason": "gone", "message": "gone [404]", "details": nil])
        #expect(Code.meteor(.string("not-found")) != Code.notFound, "Meteor's code is not the bridge's, though it reads the same")
    }

    /// Each local cause's answer: the cause's own code (the two timing ones renamed), its status
    /// and its `Retry-After`.
    @Test func localCausesMapToCodes() {
        let cases: [(DDPClientError, String, HTTPResponse.Status, Int?)] = [
            (.timedOut, "upstream-timeout", .gatewayTimeout, nil),
            (.cancelled, "upstream-unavailable", .serviceUnavailable, 5),
            (.connectionClosed("gone"), "connection-closed", .serviceUnavailable, 1),
            (DDPClientError(.messageTooLarge, "big"), "message-too-large", .badGateway, nil),
            (DDPClientError(.subscriptionStopped, "stopped"), "subscription-stopped", .badRequest, nil),
            (DDPClientError(.tooManyDocuments, "many"), "too-many-documents", .unprocessableContent, nil),
            (DDPClientError(.memoryBudgetExhausted, "full"), "memory-budget-exhausted", .serviceUnavailable, 30),
            (DDPClientError(.memoryShareExhausted, "share"), "memory-share-exhausted", .tooManyRequests, 30),
            (.loginLost(.meteor(403, "no")), "login-lost", .unauthorized, nil)
        ]
        for (cause, name, status, retryAfter) in cases {
            let error = BridgeError.from(cause)
            #expect(error.error == .string(name), "\(cause.code)")
            #expect(error.status == status, "\(cause.code)")
            #expect(error.retryAfter == retryAfter, "\(cause.code)")
        }
    }

    /// A refused connection's answer is written by hand, before HTTP runs: byte for byte the one
    /// it always was.
    @Test func connectionRefusalsAreTheDocumentedBytes() {
        let fromAddress = ConnectionAdmission.refusal(.tooManyFromAddress)
        let body429 =
            #"{"error":"too-many-connections-from-address","reason":"This address has its maximum of connections open","message":"This address has its maximum of connections open [too-many-connections-from-address]","details":null}"#
        #expect(
            String(buffer: fromAddress)
                == "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: \(body429.utf8.count)\r\n"
                + "Retry-After: 5\r\nConnection: close\r\n\r\n\(body429)")
        let full = ConnectionAdmission.refusal(.tooMany)
        let body503 =
            #"{"error":"too-many-connections","reason":"The bridge holds its maximum of connections","message":"The bridge holds its maximum of connections [too-many-connections]","details":null}"#
        #expect(
            String(buffer: full)
                == "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body503.utf8.count)\r\n"
                + "Retry-After: 5\r\nConnection: close\r\n\r\n\(body503)")
    }
}
