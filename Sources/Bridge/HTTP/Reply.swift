import DDP
import HTTPTypes
import Hummingbird
import NIOCore

/// How routes answer: EJSON bodies as compact UTF-8 JSON.
enum Reply {
    static func json(_ value: EJSON, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: EJSONWriter.encode(value))))
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
