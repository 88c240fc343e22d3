import DDP
import HTTPTypes
import Hummingbird
import NIOCore

/// How routes answer: EJSON bodies as compact UTF-8 JSON.
enum Reply {
    static func json(_ value: EJSON, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        json(encoded: ByteBuffer(bytes: EJSONWriter.encode(value)), status: status, headers: headers)
    }

    /// A body already encoded as JSON (kept, or written straight into bytes).
    /// `Upstream-State`: on an answer served from a session's cache while its upstream is not
    /// connected, the upstream's state (`connecting`, `reconnecting`, `closed`): the answer may be stale.
    static let upstreamState = HTTPField.Name("Upstream-State") ?? .via

    /// The headers of an answer from `session`'s cache: `Upstream-State` while its upstream is not connected.
    static func cacheHeaders(_ staleness: String?) -> HTTPFields {
        guard let staleness else { return [:] }
        return [upstreamState: staleness]
    }

    static func json(encoded body: ByteBuffer, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }
}

/// The cookie a browser session's token travels in (the web console uses it).
enum SessionCookie {
    static let name = "ddp_bridge_session"

    static func setting(_ token: String) -> String {
        "\(name)=\(token); Path=/; HttpOnly; SameSite=Strict"
    }

    static let cleared = "\(name)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
}
