public import DDP
public import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWSCompression
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
public import NIOWebSocket
import ServiceLifecycle
public import WSCore

/// A scriptable stand-in for a Meteor server, for tests of upstream faults: each WebSocket
/// connection runs the test's script, which reads what the client sent and answers anything
/// (malformed DDP, oversized frames, nothing at all), or closes mid-conversation. In `stall`
/// mode it accepts TCP connections and never answers the WebSocket upgrade; in `answer` mode it
/// answers every request with a plain HTTP response (a web app's page where DDP was expected).
public final class FakeUpstream: Sendable {
    public typealias Script = @Sendable (FakeConnection) async throws -> Void

    public enum Handshake: Sendable {
        /// Upgrade to WebSocket and run the script.
        case accept
        /// Accept TCP, read the upgrade request, never answer.
        case stall
        /// Accept TCP and answer each request with this status, content type and body, keeping
        /// the connection open (as a web server does with keep-alive).
        case answer(status: Int, contentType: String, body: String)
    }

    private struct State {
        var running: (group: ServiceGroup, task: Task<Void, any Error>)?
        var stallChannel: (any Channel)?
        var arrivals: [ContinuousClock.Instant] = []
        var open = 0
        var port = 0
        var live: [ObjectIdentifier: FakeConnection] = [:]
    }

    private let handshake: Handshake
    private let script: Script
    private let maxFrameSize: Int
    private let compression: Bool
    private let claimedExtensions: String?
    private let state = NIOLockedValueBox(State())
    /// Signalled when a connection opens or closes.
    private let changes = ChangeSignal()

    /// With `compression`, the server agrees to `permessage-deflate` when offered and compresses
    /// what it sends (messages of 256 bytes or more). With `claimedExtensions`, the upgrade's answer
    /// names them in `Sec-WebSocket-Extensions` whether or not the client offered them (which
    /// RFC 6455 §9.1 forbids); the server itself runs none of them.
    public init(
        handshake: Handshake = .accept, maxFrameSize: Int = 64 << 20, compression: Bool = false, claimedExtensions: String? = nil,
        script: @escaping Script = { _ in }
    ) {
        self.handshake = handshake
        self.script = script
        self.maxFrameSize = maxFrameSize
        self.compression = compression
        self.claimedExtensions = claimedExtensions
    }

    public var url: String { "ws://127.0.0.1:\(state.withLockedValue { $0.port })/websocket" }
    /// When each connection arrived (TCP accepted in `stall` mode, WebSocket upgraded otherwise).
    public var arrivals: [ContinuousClock.Instant] { state.withLockedValue { $0.arrivals } }
    /// Connections open now.
    public var openConnections: Int { state.withLockedValue { $0.open } }

    /// Waits (bounded) until `condition` holds: checked now and whenever a connection opens or
    /// closes. Throws ``ConditionNotMet`` after `timeout`.
    public func wait(_ what: String, timeout: Duration = .seconds(10), until condition: (FakeUpstream) -> Bool) async throws {
        try await changes.wait(what, timeout: timeout) { condition(self) }
    }

    /// Starts listening on a free loopback port.
    public func start() async throws {
        switch handshake {
        case .stall: try await startPlain { _ in SilentHandler() }
        case .answer(let status, let contentType, let body):
            try await startPlain { _ in PlainHTTPAnswer(status: status, contentType: contentType, body: body) }
        case .accept: try await startAccepting()
        }
    }

    public func stop() async {
        let (running, channel) = state.withLockedValue { state in
            defer {
                state.running = nil
                state.stallChannel = nil
            }
            return (state.running, state.stallChannel)
        }
        if let running {
            await running.group.triggerGracefulShutdown()
            _ = await running.task.result
        }
        try? await channel?.close()
    }

    /// Closes every WebSocket connection at once (an upstream restart, as the clients see it).
    public func dropAll() async {
        let live = state.withLockedValue { Array($0.live.values) }
        await withDiscardingTaskGroup { group in
            for connection in live { group.addTask { await connection.close() } }
        }
    }

    private func opened() {
        state.withLockedValue {
            $0.arrivals.append(.now)
            $0.open += 1
        }
        changes.signal()
    }
    private func closed() {
        state.withLockedValue { $0.open -= 1 }
        changes.signal()
    }

    private func startAccepting() async throws {
        let router = Router(context: BasicWebSocketRequestContext.self)
        let claimed: HTTPFields = claimedExtensions.map { [.secWebSocketExtensions: $0] } ?? [:]
        router.ws("websocket", shouldUpgrade: { _, _ in .upgrade(claimed) }) { inbound, outbound, context in
            self.opened()
            let connection = FakeConnection(headers: context.request.headers, inbound: inbound, outbound: outbound, maxSize: self.maxFrameSize)
            self.state.withLockedValue { $0.live[ObjectIdentifier(connection)] = connection }
            defer {
                self.state.withLockedValue { _ = $0.live.removeValue(forKey: ObjectIdentifier(connection)) }
                self.closed()
            }
            try? await self.script(connection)
        }
        var logger = Logger(label: "fake-upstream")
        logger.logLevel = .critical
        let (bound, boundContinuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: Router(),
            server: .http1WebSocketUpgrade(
                webSocketRouter: router,
                configuration: .init(
                    ws: .init(
                        maxFrameSize: maxFrameSize, extensions: compression ? [.perMessageDeflate(maxDecompressedFrameSize: maxFrameSize)] : [],
                        autoPing: .disabled, closeTimeout: .seconds(1)))),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                boundContinuation.yield(channel.localAddress?.port ?? 0)
                boundContinuation.finish()
            },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        let task = Task { try await group.run() }
        var iterator = bound.makeAsyncIterator()
        let port = await iterator.next() ?? 0
        state.withLockedValue {
            $0.running = (group, task)
            $0.port = port
        }
        if port == 0 { throw FakeUpstreamError.didNotStart }
    }

    /// A plain TCP server whose connections each get the handler `make` returns.
    private func startPlain(_ make: @escaping @Sendable (any Channel) -> any ChannelHandler & Sendable) async throws {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                self.opened()
                channel.closeFuture.whenComplete { _ in self.closed() }
                return channel.pipeline.addHandler(make(channel))
            }
            .bind(host: "127.0.0.1", port: 0).get()
        state.withLockedValue {
            $0.stallChannel = channel
            $0.port = channel.localAddress?.port ?? 0
        }
    }
}

enum FakeUpstreamError: Error { case didNotStart, closed }

/// Swallows every byte; closes its side when the peer closes (so a socket left open is the client's).
private final class SilentHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelEvent, case .inputClosed = event as? ChannelEvent { context.close(promise: nil) }
    }
}

/// Answers whatever arrives with one plain HTTP response (once per read that starts a request;
/// a stand-in does not need to parse), and keeps the connection open; closes when the peer does.
private final class PlainHTTPAnswer: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let response: String

    init(status: Int, contentType: String, body: String) {
        response =
            "HTTP/1.1 \(status) \(status == 200 ? "OK" : "Status")\r\nContent-Type: \(contentType)\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: keep-alive\r\n\r\n\(body)"
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let request = unwrapInboundIn(data)
        guard request.readableBytesView.starts(with: "GET ".utf8) else { return }
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: response)), promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelEvent, case .inputClosed = event as? ChannelEvent { context.close(promise: nil) }
    }
}

/// One client connection as a script sees it.
public final class FakeConnection: @unchecked Sendable {
    /// The upgrade request's headers (the bridge's `X-Forwarded-For`, say).
    public let headers: HTTPFields
    private var messages: WebSocketInboundMessageStream.AsyncIterator
    private let outbound: WebSocketOutboundWriter

    init(headers: HTTPFields, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, maxSize: Int) {
        self.headers = headers
        self.messages = inbound.messages(maxSize: maxSize).makeAsyncIterator()
        self.outbound = outbound
    }

    /// The next DDP message from the client; throws when the connection has closed.
    public func receive() async throws -> EJSON {
        while let message = try await messages.next() {
            guard case .text(let text) = message else { continue }
            return try EJSONParser.parse(Array(text.utf8))
        }
        throw FakeUpstreamError.closed
    }

    /// The next message with this `msg`, answering pings and skipping others.
    public func receive(_ kind: String) async throws -> EJSON {
        while true {
            let message = try await receive()
            if message["msg"]?.stringValue == kind { return message }
            if message["msg"]?.stringValue == "ping" { try await send(#"{"msg":"pong"}"#) }
        }
    }

    public func send(_ text: String) async throws { try await outbound.write(.text(text)) }

    /// Sends `frame` as it is: masked, with reserved bits, or with bytes that are not UTF-8 in a
    /// text frame, as no well-behaved server would.
    public func send(frame: WebSocketFrame) async throws { try await outbound.write(.custom(frame)) }

    /// Closes the WebSocket from the server's side.
    public func close() async { try? await outbound.close(.goingAway, reason: "closed by the test") }

    /// Reads `connect` and answers `connected`.
    public func handshake(session: String = "fake") async throws {
        _ = try await receive("connect")
        try await send(#"{"msg":"connected","session":"\#(session)"}"#)
    }

    /// Answers as a plain Meteor server would until the client goes: subscriptions get `ready`,
    /// methods a `null` result and `updated`, unless `answer` returns frames of its own for a message.
    public func serve(_ answer: @Sendable (EJSON) async throws -> [String]? = { _ in nil }) async throws {
        while true {
            let message = try await receive()
            if let frames = try await answer(message) {
                for frame in frames { try await send(frame) }
                continue
            }
            let id = message["id"]?.stringValue ?? ""
            switch message["msg"]?.stringValue {
            case "ping": try await send(#"{"msg":"pong"}"#)
            case "sub": try await send(#"{"msg":"ready","subs":["\#(id)"]}"#)
            case "unsub": try await send(#"{"msg":"nosub","id":"\#(id)"}"#)
            case "method":
                try await send(#"{"msg":"result","id":"\#(id)","result":null}"#)
                try await send(#"{"msg":"updated","methods":["\#(id)"]}"#)
            default: break
            }
        }
    }
}
