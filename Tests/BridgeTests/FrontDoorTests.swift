import DDP
import Foundation
import HTTPTypes
import Testing

@testable import Bridge

/// The same odd requests, to every route family, through both ways a request can be answered:
/// the front door on the event loop (a plain `GET`) and the router (the same request with an
/// `Origin`, which the door leaves to the router, where CORS is). One rule: both answer alike,
/// the same status and the same error code, whatever the target's oddity.
@Suite struct FrontDoorTests {
    /// A route family: its path and query, and whether it needs the session's token.
    struct Family: Sendable, CustomTestStringConvertible {
        let name: String
        let path: String
        let query: String
        let withToken: Bool
        var testDescription: String { name }
    }

    static let families: [Family] = [
        Family(name: "liveness", path: "/healthz", query: "", withToken: false),
        Family(name: "readiness", path: "/readyz", query: "", withToken: false),
        Family(name: "session stream", path: "/v1/events", query: "collections=tasks", withToken: true),
        Family(name: "session stream without a credential", path: "/v1/events", query: "collections=tasks", withToken: false),
        Family(name: "public stream", path: "/v1/public/events", query: "subscribe=tasks&collections=tasks", withToken: false),
        Family(name: "public stream, not public", path: "/v1/public/events", query: "subscribe=secret", withToken: false),
        Family(name: "session query", path: "/v1/collections/tasks", query: "limit=1", withToken: true),
        Family(name: "public read", path: "/v1/public/collections/tasks", query: "subscribe=tasks", withToken: false)
    ]

    /// An odd form of a family's request: its target, and extra header lines and body.
    struct Oddity: Sendable {
        let name: String
        let target: @Sendable (Family) -> String
        var headers: [String] = []
        var body: String = ""
    }

    static func plain(_ family: Family) -> String { family.path + (family.query.isEmpty ? "" : "?" + family.query) }
    static func withQuery(_ family: Family, _ extra: String) -> String {
        family.path + "?" + (family.query.isEmpty ? extra : family.query + "&" + extra)
    }

    static let oddities: [Oddity] = [
        Oddity(name: "as is", target: { plain($0) }),
        Oddity(name: "a doubled slash", target: { "/" + plain($0) }),
        Oddity(name: "a trailing slash", target: { $0.path + "/" + ($0.query.isEmpty ? "" : "?" + $0.query) }),
        Oddity(name: "the absolute form", target: { "http://127.0.0.1" + plain($0) }),
        Oddity(name: "a ; parameter", target: { $0.path + ";v=1" + ($0.query.isEmpty ? "" : "?" + $0.query) }),
        Oddity(name: "upper case", target: { plain($0).uppercased() }),
        Oddity(name: "an encoded slash", target: { $0.path.replacingOccurrences(of: "/v1/", with: "/v1%2F") }),
        Oddity(name: "a duplicate parameter", target: { withQuery($0, $0.query.isEmpty ? "x=1&x=2" : $0.query) }),
        Oddity(name: "an undecodable parameter", target: { withQuery($0, "x=%ZZ") }),
        Oddity(name: "a body on a GET", target: { plain($0) }, headers: ["Content-Length: 2"], body: "{}"),
        Oddity(name: "Expect: 100-continue", target: { plain($0) }, headers: ["Expect: 100-continue"])
    ]

    @Test(arguments: families)
    func bothDoorsAnswerOddTargetsAlike(_ family: Family) async throws {
        try await PublicFanoutTests.run("tasks(*)") { h, port in
            // Readiness says the same to both doors once the upstream is up.
            try await h.readiness("ready") { $0.status == .ok }
            let token = family.withToken ? try await h.session().token : nil
            for oddity in Self.oddities {
                let target = oddity.target(family)
                var headers = oddity.headers
                if let token { headers.append("Authorization: Bearer \(token)") }
                let door = try await Self.answer(port: port, target: target, headers: headers, body: oddity.body)
                let router = try await Self.answer(
                    port: port, target: target, headers: headers + ["Origin: http://127.0.0.1:\(port)"], body: oddity.body)
                #expect(door.status == router.status, "\(family.name), \(oddity.name) (\(target)): door \(door) router \(router)")
                #expect(door.error == router.error, "\(family.name), \(oddity.name) (\(target)): door \(door) router \(router)")
                if oddity.name == "as is" {
                    #expect(door.status < 400 || !family.withToken, "\(family.name): \(door)")
                }
                if oddity.name == "an undecodable parameter" {
                    #expect(door.status == 400, "\(family.name): \(door)")
                }
                if oddity.name == "upper case" {
                    #expect(door.status == 404, "\(family.name): \(door)")
                }
            }
        }
    }

    /// The status line and error code of the answer to one request on a connection of its own
    /// (a stream's answer is read up to its head, then the connection closed).
    static func answer(port: Int, target: String, headers: [String], body: String) async throws -> (status: Int, error: String?) {
        let connection = try await RawConnection.open(port: port)
        let head = (["GET \(target) HTTP/1.1", "Host: 127.0.0.1:\(port)"] + headers).joined(separator: "\r\n") + "\r\n\r\n"
        try await connection.send(head + body)
        let complete = await connection.waitUntil("an answer", within: .seconds(10)) { Self.parse($0) != nil }
        let text = await connection.received
        try? await connection.close()
        guard complete, let answer = Self.parse(text) else {
            Issue.record("no answer to \(target): \(text.prefix(300))")
            return (0, nil)
        }
        return answer
    }

    /// The first final answer in `text` (a `100 Continue` before it is skipped) once its head,
    /// and a body of `Content-Length`, are complete; `nil` before.
    static func parse(_ text: String) -> (status: Int, error: String?)? {
        var rest = Substring(text)
        while let headEnd = rest.range(of: "\r\n\r\n") {
            let head = rest[..<headEnd.lowerBound]
            let fields = head.split(separator: "\r\n")
            guard let statusLine = fields.first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else { return nil }
            rest = rest[headEnd.upperBound...]
            if status == 100 { continue }
            let length = fields.dropFirst().first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
            guard let length else { return (status, nil) }  // a stream: its head is enough
            guard rest.utf8.count >= length else { return nil }
            let body = String(decoding: Array(rest.utf8.prefix(length)), as: UTF8.self)
            let error = (try? EJSONParser.parse(Array(body.utf8)))?["error"]?.stringValue
            return (status, error)
        }
        return nil
    }
}
