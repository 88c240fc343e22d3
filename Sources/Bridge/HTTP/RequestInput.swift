import DDP
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// What routes read from a request, checked: JSON bodies, the session credential, query
/// parameters (numbers, durations, switches). The end user's address is ``ClientIdentity``'s.
enum RequestInput {
    /// The request body as EJSON; `nil` when empty. 400 for malformed JSON/EJSON, 413 when too large.
    static func body(_ request: Request, limit: Int) async throws -> EJSON? {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: limit)
        } catch let error as NIOTooManyBytesError {
            throw error
        } catch let error as HTTPError {
            throw error
        } catch {
            // The client's fault, not ours: the body ended (or broke off) before its Content-Length.
            throw BridgeError.badRequest("the request body could not be read whole: it ended before its Content-Length")
        }
        let bytes = buffer.readableBytesView
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return nil }
        do {
            return try EJSONParser.parse(bytes)
        } catch {
            throw BridgeError.badRequest("the body is not valid JSON: \(error)")
        }
    }

    /// The body as an object (or `nil` when empty); 400 for anything else.
    static func objectBody(_ request: Request, limit: Int) async throws -> EJSONObject? {
        switch try await body(request, limit: limit) {
        case nil: return nil
        case .object(let o)?: return o
        case let other?: throw BridgeError.badRequest("the body must be a JSON object, not \(other.typeName)")
        }
    }

    /// The credential a request carries: `Authorization: Bearer`, the session cookie, or `?token=`.
    static func credential(_ request: Request) -> (token: String, fromBearer: Bool)? {
        credential(request.headers) ?? query(request, "token").flatMap { $0.isEmpty ? nil : ($0, false) }
    }

    /// The credential a request's headers carry: `Authorization: Bearer`, or the session cookie.
    static func credential(_ headers: HTTPFields) -> (token: String, fromBearer: Bool)? {
        // On every request: plain UTF-8 work, no Foundation (its trimming showed in profiles).
        if let header = headers[.authorization], header.prefix(7).lowercased() == "bearer " {
            let token = trimmed(header.dropFirst(7))
            if !token.isEmpty { return (String(token), true) }
        }
        for cookieHeader in headers[values: .cookie] {
            for pair in cookieHeader.split(separator: ";") {
                let kv = trimmed(pair).split(separator: "=", maxSplits: 1)
                if kv.count == 2, kv[0] == SessionCookie.name { return (String(kv[1]), false) }
            }
        }
        return nil
    }

    /// `text` without leading and trailing spaces and tabs.
    static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while let first = text.utf8.first, first == 0x20 || first == 0x09 { text = text.dropFirst() }
        while let last = text.utf8.last, last == 0x20 || last == 0x09 { text = text.dropLast() }
        return text
    }

    /// A query parameter's value, form-decoded (`+` is a space, then percent-decoding); the first wins.
    static func query(_ request: Request, _ name: String) -> String? {
        request.uri.query.flatMap { QueryString.value($0, name) }
    }

    /// The shortest upstream timeout a request may ask for.
    static let minimumTimeoutMilliseconds = 100

    /// A query parameter as a number of milliseconds, from 100 up to `max`.
    static func duration(_ request: Request, _ name: String, default value: Duration, max: Duration) throws(BridgeError) -> Duration {
        guard let text = query(request, name) else { return value }
        return try milliseconds(Int(text), name: name, max: max, given: text)
    }

    static func milliseconds(_ value: Int?, name: String, max: Duration, given: String) throws(BridgeError) -> Duration {
        let most = Int(truncatingIfNeeded: max.wholeMilliseconds)
        guard let ms = value, ms >= minimumTimeoutMilliseconds, ms <= most else {
            throw .badRequest("\(name) must be a number of milliseconds from \(minimumTimeoutMilliseconds) to \(most), got '\(given)'")
        }
        return .milliseconds(ms)
    }

    static func flag(_ request: Request, _ name: String) throws(BridgeError) -> Bool? {
        guard let text = query(request, name) else { return nil }
        switch text.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: throw .badRequest("\(name) must be true or false, got '\(text)'")
        }
    }
}
