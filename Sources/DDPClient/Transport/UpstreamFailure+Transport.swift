import DDP
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

extension UpstreamFailure {
    /// The failure an attempt's error names, at the stage the attempt had reached: the
    /// classification of what NIO, NIOSSL and the upgrade report. Pure (no channel, no clock):
    /// the shell hands it the error the attempt ended with (`UpstreamFailureTests`).
    static func classify(_ error: any Error, stage: Stage, address: UpstreamAddress?, timeout: Duration, url: String?) -> UpstreamFailure {
        UpstreamFailure(cause(of: error, stage: stage, address: address, timeout: timeout), url: url)
    }

    private static func cause(of error: any Error, stage: Stage, address: UpstreamAddress?, timeout: Duration) -> Cause {
        let endpoint = address.map { "\($0.host.contains(":") ? "[\($0.host)]" : $0.host):\($0.port)" } ?? "the upstream"
        switch error {
        case let error as UpstreamTransportError:
            switch error {
            case .timedOut(let stage): return .timedOut(stage, after: timeout)
            case .upgradeRefused(let status, let contentType): return .upgradeRefused(status: status, contentType: contentType)
            case .invalidURL: return .invalidURL
            case .messageTooLarge(let limit): return .messageTooLarge(limit: limit)
            case .invalidText: return .protocolViolation("a text message that is not UTF-8")
            case .protocolViolation(let what): return .protocolViolation(what)
            }
        case let error as NIOConnectionError:
            // Happy eyeballs: the connection attempts' errors say more than the lookups'.
            let attempts = error.connectionErrors.map(\.error)
            if let refused = attempts.first(where: { ($0 as? IOError)?.errnoCode == ECONNREFUSED }) ?? attempts.first {
                return cause(of: refused, stage: stage, address: address, timeout: timeout)
            }
            // No attempt was made: the name did not resolve.
            return .nameNotResolved(host: error.host)
        case let error as SocketAddressError.UnknownHost:
            return .nameNotResolved(host: error.host)
        case let error as IOError:
            return ioCause(error.errnoCode, stage: stage, endpoint: endpoint, timeout: timeout)
        case let error as ChannelError:
            switch error {
            case .connectTimeout: return .timedOut(.tcp, after: timeout)
            // NIO's upgrade handler fails the upgrade with `inappropriateOperationForState` when
            // it is removed before an answer: the channel closed under it.
            case .ioOnClosedChannel, .alreadyClosed, .eof, .outputClosed, .inputClosed, .inappropriateOperationForState: return .closed(stage)
            default: return .other("\(error)")
            }
        case let error as NIOSSLError:
            switch error {
            case .handshakeFailed(let reason):
                let text = tlsReason(reason)
                return text == "eof during handshake" ? .closed(.tls) : .tlsFailed(text)
            case .uncleanShutdown: return .closed(stage)
            default: return .tlsFailed("\(error)")
            }
        case let error as NIOSSLExtraError:
            if error == .failedToValidateHostname {
                return .tlsFailed("the certificate is not valid for the host name \(address?.host ?? "asked for")")
            }
            return .tlsFailed("\(error)")
        case let error as BoringSSLError:
            return .tlsFailed(tlsReason(error))
        case let error as NIOHTTPClientUpgradeError:
            switch error {
            case .responseProtocolNotFound: return .upgradeInvalid("the 101 answer names no WebSocket upgrade")
            case .upgraderDeniedUpgrade: return .upgradeInvalid("the 101 answer's Sec-WebSocket-Accept does not match the request")
            default: return .upgradeInvalid("\(error)")
            }
        case is HTTPParserError:
            return .upgradeInvalid("the answer is not HTTP")
        default:
            return .other("\(error)")
        }
    }

    private static func ioCause(_ code: CInt, stage: Stage, endpoint: String, timeout: Duration) -> Cause {
        switch code {
        case ECONNREFUSED: .connectionRefused(endpoint: endpoint)
        case EHOSTUNREACH, ENETUNREACH, EHOSTDOWN, ENETDOWN, EADDRNOTAVAIL:
            .hostUnreachable(endpoint: endpoint, detail: String(cString: strerror(code)).lowercased())
        case ETIMEDOUT: .timedOut(stage == .tcp ? .tcp : stage, after: timeout)
        case ECONNRESET, EPIPE, ECONNABORTED: .closed(stage)
        default: .other(String(cString: strerror(code)).lowercased())
        }
    }

    /// "certificate verify failed" from BoringSSL's error stack ("error:1000007d:SSL
    /// routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at …"): each error's reason, lowercased.
    static func tlsReason(_ error: BoringSSLError) -> String {
        switch error {
        case .sslError(let stack), .unknownError(let stack), .invalidSNIName(let stack), .failedToSetALPN(let stack):
            let reasons = stack.map { tlsReason(description: $0.description) }
            var seen = Set<String>()
            let distinct = reasons.filter { seen.insert($0).inserted }
            return distinct.isEmpty ? "\(error)" : distinct.joined(separator: ", ")
        default:
            return "\(error)"
        }
    }

    /// One BoringSSL error's reason, from its description (the last field of its `error:` code).
    static func tlsReason(description: String) -> String {
        if let start = description.range(of: "error:") {
            var code = description[start.lowerBound...]
            if let location = code.range(of: " at ") { code = code[..<location.lowerBound] }
            if let reason = code.split(separator: ":").last, code.split(separator: ":").count > 2 {
                return reason.trimmingCharacters(in: .whitespaces).lowercased().replacingOccurrences(of: "_", with: " ")
            }
        }
        // A synthetic error: "Error:  EOF during handshake".
        let text = description.hasPrefix("Error:") ? description.dropFirst("Error:".count) : Substring(description)
        return text.trimmingCharacters(in: .whitespaces).lowercased()
    }
}
