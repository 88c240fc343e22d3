import Bridge
import DDP
import DDPClient
import DDPServer
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

// MARK: - A small HTTP/1.1 client (one request per connection)

enum HTTP {
    struct Reply: Sendable {
        let status: Int
        let body: String
        var json: EJSON { (try? EJSONParser.parse(body)) ?? .null }
    }

    /// One request on its own connection (`Connection: close`).
    static func request(port: Int, _ method: HTTPMethod, _ path: String, token: String? = nil, body: String? = nil) async throws -> Reply {
        try await withConnection(port: port) { try await $0.send(method, path, token: token, body: body, close: true) }
    }

    /// Requests made one after another on one kept-alive connection.
    final class Exchange {
        private var inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
        private let outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>

        init(_ inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>, _ outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>) {
            self.inbound = inbound.makeAsyncIterator()
            self.outbound = outbound
        }

        func send(_ method: HTTPMethod, _ path: String, token: String? = nil, body: String? = nil, close: Bool = false) async throws -> Reply {
            var headers = HTTPHeaders([("Host", "127.0.0.1"), ("Connection", close ? "close" : "keep-alive")])
            if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
            if let body {
                headers.add(name: "Content-Type", value: "application/json")
                headers.add(name: "Content-Length", value: String(body.utf8.count))
            }
            try await outbound.write(.head(HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)))
            if let body { try await outbound.write(.body(.byteBuffer(ByteBuffer(string: body)))) }
            try await outbound.write(.end(nil))
            var status = 0
            var text = ""
            while let part = try await inbound.next() {
                switch part {
                case .head(let head): status = Int(head.status.code)
                case .body(let buffer): text += String(buffer: buffer)
                case .end: return Reply(status: status, body: text)
                }
            }
            throw BenchError("the connection closed before the reply to \(method) \(path) ended")
        }
    }

    static func withConnection<T: Sendable>(port: Int, _ body: (Exchange) async throws -> T) async throws -> T {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in try await body(Exchange(inbound, outbound)) }
    }

    /// A new bridge session; returns its token.
    static func session(port: Int, login: String = "{}") async throws -> String {
        let reply = try await request(port: port, .POST, "/v1/sessions", body: login)
        guard reply.status == 201, let token = reply.json["token"]?.stringValue else {
            throw BenchError("session creation failed: \(reply.status) \(reply.body)")
        }
        return token
    }
}

/// Runs `body(0..<count)` with at most `concurrency` at a time; the first error ends the run.
func forEachBounded(_ count: Int, concurrency: Int, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        while next < min(concurrency, count) {
            let index = next
            group.addTask { try await body(index) }
            next += 1
        }
        while try await group.next() != nil {
            if next < count {
                let index = next
                group.addTask { try await body(index) }
                next += 1
            }
        }
    }
}
