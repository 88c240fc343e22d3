import Bridge
import Foundation
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// `Connection: close` through a raw socket, as a token in any case (RFC 9112 §9.6): the
/// request loop compared the header with `close` exactly, so `Close` and `keep-alive, close`
/// kept the connection open, and nothing said it would close.
@Suite struct ConnectionCloseTests {
    @Test(arguments: ["Close", "keep-alive, close", "CLOSE", "close"])
    func aRequestThatAsksToCloseIsAnsweredSoAndTheConnectionClosed(connection: String) async throws {
        try await BridgeHarness.run(configure: { $0.readTimeout = .seconds(60) }) { h in
            let port = try #require(h.client.port)
            let request = "GET /v1/public/publications HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: \(connection)\r\n\r\n"
            let (text, closed) = try await Self.exchange(port: port, request)
            #expect(closed, "the connection stayed open after the answer: \(text)")
            let head = text.components(separatedBy: "\r\n\r\n").first ?? ""
            #expect(head.hasPrefix("HTTP/1.1 200"), "\(text)")
            #expect(head.lowercased().contains("\r\nconnection: close"), "the answer does not say it closes: \(head)")
            // A request pipelined behind it is not read: no answer to it (NIO's parser refuses
            // data after `Connection: close`, and a loop that read on answered that with a 400).
            let pipelined = try await Self.exchange(
                port: port,
                request + "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            #expect(pipelined.closed)
            #expect(pipelined.text.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer only: \(pipelined.text)")
            #expect(h.registry.count == 0)
        }
    }

    /// Sends `request` on a new connection and reads until the server closes it: what came back,
    /// and whether it was the server that closed (this side closes after `limit`).
    static func exchange(port: Int, _ request: String, within limit: TimeAmount = .seconds(10)) async throws -> (text: String, closed: Bool) {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
            }
        let gaveUp = NIOLockedValueBox(false)
        let deadline = channel.channel.eventLoop.scheduleTask(in: limit) {
            gaveUp.withLockedValue { $0 = true }
            channel.channel.close(promise: nil)
        }
        var text = ""
        try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: request))
            do {
                for try await buffer in inbound { text += String(buffer: buffer) }
            } catch {}  // closed from this side
        }
        deadline.cancel()
        return (text, !gaveUp.withLockedValue { $0 })
    }
}

/// HTTP/1.0 knows no chunks: a stream answered to an HTTP/1.0 request is an HTTP/1.0 response
/// whose body ends with the connection, from either door (the event loop's, and the router's for
/// a snapshot). Both once answered `Transfer-Encoding: chunked`. And a request the HTTP parser
/// refuses is counted in `ddp_bridge_http_requests_total`, as every answered request is.
@Suite struct HTTP10AndUnparsedRequestTests {
    @Test(arguments: ["/v1/events", "/v1/events?snapshot=true"])
    func anHTTP10StreamIsCloseDelimited(target: String) async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            let port = try #require(h.client.port)
            let raw = try await RawConnection.open(port: port)
            try await raw.send("GET \(target) HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n")
            _ = try await raw.waitUntilReceived("retry:", count: 1, within: .seconds(10))
            let text = await raw.received
            let head = try #require(text.range(of: "\r\n\r\n"))
            let headText = text[..<head.lowerBound].lowercased()
            #expect(headText.hasPrefix("http/1.0 200"), "\(headText)")
            #expect(!headText.contains("transfer-encoding"), "\(headText)")
            #expect(text[head.upperBound...].hasPrefix("retry:"), "the body's bytes as they are, no chunk size: \(text)")
            try await raw.close()
        }
    }

    @Test func aRequestTheParserRefusesIsCounted() async throws {
        try await BridgeHarness.run { h in
            let port = try #require(h.client.port)
            let (text, _) = try await RawConnection.exchange(port: port, "NOT HTTP AT ALL\r\n\r\n")
            #expect(text.hasPrefix("HTTP/1.1 400"), "\(text)")
            try await h.metrics("the refusal counted") {
                (metricSample($0, #"ddp_bridge_http_requests_total{route="unparsed",status="400"}"#) ?? 0) >= 1
            }
        }
    }
}
