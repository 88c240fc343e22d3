import DDP
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import Testing

@testable import DDPClient

/// The errors an attempt ends with, classified into ``DDP/UpstreamFailure``: pure, no socket
/// (the same errors through real sockets: `UpstreamCauseTests`).
@Suite struct UpstreamFailureClassificationTests {
    static let url = "ws://127.0.0.1:3999/websocket"

    static func classify(_ error: any Error, at stage: UpstreamFailure.Stage = .tcp, url: String = url) throws -> UpstreamFailure {
        UpstreamFailure.classify(error, stage: stage, address: try UpstreamAddress(url), timeout: .seconds(10), url: url)
    }

    @Test func aRefusedConnectionNamesTheAddress() throws {
        let failure = try Self.classify(IOError(errnoCode: ECONNREFUSED, reason: "connect"))
        #expect(failure.cause == .connectionRefused(endpoint: "127.0.0.1:3999"))
        #expect(failure.url == Self.url)
        let v6 = try Self.classify(IOError(errnoCode: ECONNREFUSED, reason: "connect"), url: "ws://[::1]:3999/websocket")
        #expect(v6.message == "nothing is listening at [::1]:3999 (connection refused)")
    }

    @Test func networkErrorsAreUnreachableHostsOrTimeouts() throws {
        #expect(try Self.classify(IOError(errnoCode: EHOSTUNREACH, reason: "connect")).code == .hostUnreachable)
        #expect(try Self.classify(IOError(errnoCode: ENETUNREACH, reason: "connect")).code == .hostUnreachable)
        #expect(try Self.classify(IOError(errnoCode: ETIMEDOUT, reason: "connect")).cause == .timedOut(.tcp, after: .seconds(10)))
        #expect(try Self.classify(ChannelError.connectTimeout(.seconds(10))).cause == .timedOut(.tcp, after: .seconds(10)))
        #expect(try Self.classify(IOError(errnoCode: ECONNRESET, reason: "read"), at: .upgrade).cause == .closed(.upgrade))
    }

    @Test func theAttemptsDeadlineNamesTheStageItCut() throws {
        for stage in [UpstreamFailure.Stage.tcp, .tls, .upgrade] {
            #expect(try Self.classify(UpstreamTransportError.timedOut(stage), at: stage).cause == .timedOut(stage, after: .seconds(10)))
        }
    }

    @Test func anUpgradeAnsweredWithAnotherStatusNamesIt() throws {
        let failure = try Self.classify(UpstreamTransportError.upgradeRefused(status: 200, contentType: "text/html"), at: .upgrade)
        #expect(failure.cause == .upgradeRefused(status: 200, contentType: "text/html"))
        #expect(failure.httpStatus == 200)
        let invalid = try Self.classify(NIOHTTPClientUpgradeError.upgraderDeniedUpgrade, at: .upgrade)
        #expect(invalid.code == .upgradeInvalid)
        #expect(invalid.message.contains("Sec-WebSocket-Accept"))
        let notHTTP = try Self.classify(HTTPParserError.invalidConstant, at: .upgrade)
        #expect(notHTTP.cause == .upgradeInvalid("the answer is not HTTP"))
        #expect(notHTTP.hint?.contains("wss://") == true, "a ws:// URL at a TLS port gets TLS's answer, which is not HTTP")
    }

    @Test func aChannelThatClosesIsClosedAtItsStage() throws {
        #expect(try Self.classify(ChannelError.ioOnClosedChannel, at: .upgrade).cause == .closed(.upgrade))
        #expect(try Self.classify(ChannelError.eof, at: .tls).cause == .closed(.tls))
        #expect(try Self.classify(NIOSSLError.uncleanShutdown, at: .tls).cause == .closed(.tls))
    }

    @Test func tlsFailuresSayWhatTheLibrarySaid() throws {
        let host = try Self.classify(NIOSSLExtraError.failedToValidateHostname, at: .tls, url: "wss://app.example/websocket")
        #expect(host.cause == .tlsFailed("the certificate is not valid for the host name app.example"))
        #expect(host.hint?.contains("host name the certificate names") == true)
        let line = "Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at /src/ssl/handshake.cc:393"
        #expect(UpstreamFailure.tlsReason(description: line) == "certificate verify failed")
        #expect(UpstreamFailure.tlsReason(description: "Error:  EOF during handshake") == "eof during handshake")
    }

    @Test func violationsAndTheRestKeepTheirCause() throws {
        #expect(try Self.classify(UpstreamTransportError.messageTooLarge(limit: 1024), at: .open).cause == .messageTooLarge(limit: 1024))
        #expect(try Self.classify(UpstreamTransportError.invalidText, at: .open).code == .protocolViolation)
        #expect(try Self.classify(UpstreamTransportError.invalidURL("x"), at: .tcp).code == .invalidURL)
        struct Odd: Error {}
        #expect(try Self.classify(Odd()).code == .connectionFailed)
    }
}
