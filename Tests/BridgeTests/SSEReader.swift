import DDP
import FaultKit
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing

/// One event as read off the wire.
struct SSEEvent: Sendable, Equatable {
    var id: String?
    var event: String
    var data: String
    var json: DDP.EJSON { (try? DDP.EJSONParser.parse(data)) ?? .null }
}

/// A strict Server-Sent Events reader over a plain HTTP/1.1 connection: every line must be a
/// known field (`id`, `event`, `data`, `retry`) or a comment; anything else is a violation.
actor SSEReader {
    private(set) var status: Int?
    private(set) var contentType: String?
    private(set) var events: [SSEEvent] = []
    private(set) var comments = 0
    private(set) var retry: Int?
    private(set) var violations: [String] = []
    private(set) var finished = false
    private(set) var bodyText = ""
    private var pending: [UInt8] = []
    private var paused = false
    /// Signalled by everything read (the head, each chunk, the end) and by ``resume()``.
    private let changes = ChangeSignal()

    func head(_ head: HTTPResponseHead) {
        status = Int(head.status.code)
        contentType = head.headers.first(name: "content-type")
        changes.signal()
    }

    func body(_ bytes: [UInt8]) {
        bodyText += String(decoding: bytes, as: UTF8.self)
        pending += bytes
        while let end = Self.blockEnd(pending) {
            let block = String(decoding: pending[..<end], as: UTF8.self)
            pending.removeFirst(end + 2)
            parse(block)
        }
        changes.signal()
    }

    func finish() {
        finished = true
        changes.signal()
    }
    func pause() { paused = true }
    func resume() {
        paused = false
        changes.signal()
    }

    /// Returns once the reader is not paused (a test pauses it for as long as a step of the test
    /// takes; the bound only keeps a forgotten pause from hanging the run).
    func whilePaused() async throws {
        try await changes.wait("the reader resumed", timeout: .seconds(600)) { !paused }
    }

    private static func blockEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 2 else { return nil }
        for i in 0..<(bytes.count - 1) where bytes[i] == 0x0A && bytes[i + 1] == 0x0A { return i }
        return nil
    }

    private func parse(_ block: String) {
        var event = SSEEvent(id: nil, event: "message", data: "")
        var dataLines: [String] = []
        var isComment = true
        for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(":") { continue }
            isComment = false
            guard let colon = line.firstIndex(of: ":") else {
                violations.append("a line without a field: \(line)")
                continue
            }
            let field = String(line[..<colon])
            var value = line[line.index(after: colon)...]
            if value.hasPrefix(" ") { value = value.dropFirst() }
            switch field {
            case "id": event.id = String(value)
            case "event": event.event = String(value)
            case "data": dataLines.append(String(value))
            case "retry": retry = Int(value)
            default: violations.append("unknown field '\(field)'")
            }
        }
        if isComment {
            comments += 1
            return
        }
        if dataLines.isEmpty {
            if retry == nil || event.id != nil { violations.append("an event without data: \(block)") }
            return
        }
        event.data = dataLines.joined(separator: "\n")
        events.append(event)
    }

    /// Waits (bounded) until `condition` holds for the events read so far: checked now and as
    /// each chunk arrives.
    func wait(_ what: String, timeout: Duration = .seconds(10), until condition: ([SSEEvent]) -> Bool) async throws {
        do {
            try await changes.wait(what, timeout: timeout) { condition(events) }
        } catch is ConditionNotMet {
            Issue.record("\(what): not seen within \(timeout); events: \(events.map { "\($0.event) \($0.data)" })")
            throw CancellationError()
        }
    }

    /// Waits until the response head has arrived (the stream is registered with its session).
    func waitUntilOpen(timeout: Duration = .seconds(10)) async throws {
        do {
            try await changes.wait("the stream open", timeout: timeout) { finished || !(status == nil || (status == 200 && retry == nil)) }
        } catch is ConditionNotMet {}
        guard !(status == nil || (status == 200 && retry == nil)) else {
            Issue.record("the stream did not open")
            throw CancellationError()
        }
    }

    func waitUntilFinished(timeout: Duration = .seconds(20)) async throws {
        try await changes.wait("the stream finished", timeout: timeout) { finished }
    }
}

/// Opens `GET path` on the bridge and reads it as an event stream for the duration of `body`.
func withEventStream<T: Sendable>(
    port: Int, _ path: String, token: String?, headers: [(String, String)] = [],
    _ body: @Sendable (SSEReader) async throws -> T
) async throws -> T {
    let reader = SSEReader()
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
            }
        }
    var requestHeaders = HTTPHeaders([("Host", "127.0.0.1"), ("Accept", "text/event-stream")] + headers)
    if let token { requestHeaders.add(name: "Authorization", value: "Bearer \(token)") }
    let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: requestHeaders)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            try? await channel.executeThenClose { inbound, outbound in
                try await outbound.write(.head(head))
                try await outbound.write(.end(nil))
                for try await part in inbound {
                    try await reader.whilePaused()
                    switch part {
                    case .head(let head): await reader.head(head)
                    case .body(let buffer): await reader.body(Array(buffer.readableBytesView))
                    case .end: return
                    }
                }
            }
            await reader.finish()
            return nil
        }
        let result = try await body(reader)
        group.cancelAll()
        return result
    }
}

extension SSEReader {
    /// Waits (bounded) until more than `count` comment lines (heartbeats) have been read.
    func waitForComments(beyond count: Int, timeout: Duration = .seconds(10)) async throws {
        do {
            try await changes.wait("a heartbeat after \(count)", timeout: timeout) { comments > count }
        } catch is ConditionNotMet {
            Issue.record("no heartbeat after \(count) within \(timeout)")
            throw CancellationError()
        }
    }
}

/// One request on a connection of its own (the harness's client sends its requests one after
/// another on one connection); returns the status and the body.
func requestOnOwnConnection(port: Int, _ method: HTTPMethod, _ path: String, token: String?, body: String? = nil) async throws -> (
    status: Int, body: String
) {
    var headers: [(String, String)] = []
    if let token { headers.append(("Authorization", "Bearer \(token)")) }
    if body != nil { headers.append(("Content-Type", "application/json")) }
    let reply = try await rawRequest(port: port, method, path, headers: headers, body: body)
    return (reply.status, reply.body)
}

/// One request exactly as given (`Host: 127.0.0.1` unless `headers` names one), on a connection of
/// its own; returns the status, the response headers and the body.
func rawRequest(port: Int, _ method: HTTPMethod, _ path: String, headers given: [(String, String)], body: String? = nil) async throws -> (
    status: Int, headers: HTTPHeaders, body: String
) {
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
            }
        }
    var headers = HTTPHeaders([("Connection", "close")])
    if !given.contains(where: { $0.0.lowercased() == "host" }) { headers.add(name: "Host", value: "127.0.0.1") }
    headers.add(contentsOf: given)
    if let body { headers.add(name: "Content-Length", value: String(body.utf8.count)) }
    return try await channel.executeThenClose { inbound, outbound in
        try await outbound.write(.head(HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)))
        if let body { try await outbound.write(.body(.byteBuffer(ByteBuffer(string: body)))) }
        try await outbound.write(.end(nil))
        var status = 0
        var responseHeaders = HTTPHeaders()
        var text = ""
        for try await part in inbound {
            switch part {
            case .head(let head):
                status = Int(head.status.code)
                responseHeaders = head.headers
            case .body(let buffer): text += String(buffer: buffer)
            case .end: return (status, responseHeaders, text)
            }
        }
        return (status, responseHeaders, text)
    }
}
