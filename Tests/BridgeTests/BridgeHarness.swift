import Bridge
import DDP
import DDPServer
import FaultKit
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// A live bridge on a loopback port in front of the in-process demo DDP server.
struct BridgeHarness: Sendable {
    let client: any TestClientProtocol
    let upstream: LocalDDPServer
    let registry: SessionRegistry
    /// The port of the `--metrics-port` listener, once it listens (when one is configured).
    let metricsPorts: AsyncStream<Int>

    struct Reply: Sendable {
        let status: HTTPResponse.Status
        let headers: HTTPFields
        let text: String
        var json: EJSON { (try? EJSONParser.parse(text)) ?? .null }
        subscript(key: String) -> EJSON? { json[key] }
    }

    static func run(
        upstreamURL: String? = nil,
        configure: @Sendable (inout BridgeConfiguration) -> Void = { _ in },
        runtime: BridgeRuntime = BridgeRuntime(),
        logger custom: Logger? = nil,
        _ body: @Sendable (BridgeHarness) async throws -> Void
    ) async throws {
        let upstream = LocalDDPServer(configuration: DemoDataSet.configuration, logger: Logger(label: "upstream"))
        try await DemoDataSet.seed(upstream.core)
        try await upstream.start()
        // The bridge talks to the in-process server, or to the test's own (fake) upstream.
        let localURL = await upstream.url
        var configuration = BridgeConfiguration(upstream: upstreamURL ?? localURL)
        configuration.connectTimeout = .seconds(10)
        configuration.subscriptionLinger = .milliseconds(200)
        configuration.loginRateLimit = (100, .seconds(10))
        configuration.ddp.reconnect = ReconnectPolicy(initialDelay: .milliseconds(50), multiplier: 2, maxDelay: .milliseconds(300))
        configure(&configuration)
        var logger = custom ?? Logger(label: "bridge")
        if custom == nil { logger.logLevel = .warning }
        let (metricsPorts, listening) = AsyncStream.makeStream(of: Int.self)
        let (application, registry) = BridgeApplication.make(
            configuration: configuration, runtime: runtime, http: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)), logger: logger,
            onMetricsListening: { listening.yield($0) })
        do {
            try await application.test(.live) { client in
                try await body(BridgeHarness(client: client, upstream: upstream, registry: registry, metricsPorts: metricsPorts))
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    @discardableResult
    func request(_ method: HTTPRequest.Method, _ uri: String, token: String? = nil, body: String? = nil, headers: HTTPFields = [:]) async throws
        -> Reply
    {
        var headers = headers
        if let token { headers[.authorization] = "Bearer \(token)" }
        if body != nil { headers[.contentType] = "application/json" }
        return try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { response in
            Reply(status: response.status, headers: response.headers, text: String(buffer: response.body))
        }
    }

    /// A new session, optionally logged in; returns its token and the login reply.
    func session(_ login: String = "{}") async throws -> (token: String, reply: Reply) {
        let reply = try await request(.post, "/v1/sessions", body: login)
        #expect(reply.status == .created, "session creation: \(reply.text)")
        return (reply["token"]?.stringValue ?? "", reply)
    }
}

/// Every error has the same shape.
func expectError(_ reply: BridgeHarness.Reply, _ status: HTTPResponse.Status, _ error: EJSON, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(reply.status == status, "\(reply.text)", sourceLocation: sourceLocation)
    #expect(reply["error"] == error, "\(reply.text)", sourceLocation: sourceLocation)
    #expect(reply["reason"]?.stringValue != nil, sourceLocation: sourceLocation)
    #expect(reply["message"]?.stringValue != nil, sourceLocation: sourceLocation)
    #expect(reply.json.objectValue?.keys.contains("details") == true, sourceLocation: sourceLocation)
    #expect(reply.headers[.contentType] == "application/json", sourceLocation: sourceLocation)
}

func urlEncoded(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
}

/// The value of one Prometheus sample (`name` with its labels, as the text shows it).
func metricSample(_ text: String, _ prefix: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(prefix + " ") {
        return Double(line.dropFirst(prefix.count + 1))
    }
    return nil
}
