import DDP
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWSCompression
import HummingbirdWebSocket
public import Logging
import NIOCore
public import NIOSSL
import NIOWebSocket
import ServiceLifecycle

/// The in-process DDP server's listener: a WebSocket endpoint at `/websocket` in front of a
/// ``ServerCore``. It can be stopped and started again on the same port while the data
/// (the core) lives on, so tests can take the "upstream" down and bring it back.
public actor LocalDDPServer {
    public nonisolated let core: ServerCore
    private let logger: Logger
    private var running: (group: ServiceGroup, task: Task<Void, any Error>)?
    public private(set) var port: Int?
    public private(set) var host = "127.0.0.1"
    private var scheme = "ws"

    public init(configuration: DDPServerConfiguration, logger: Logger = Logger(label: "ddp-server")) {
        self.core = ServerCore(configuration: configuration, logger: logger)
        self.logger = logger
    }

    /// `ws://host:port/websocket` of the running listener.
    public var url: String {
        "\(scheme)://\(host):\(port ?? 0)/websocket"
    }

    /// Starts listening; `port` 0 picks a free port; with `tls`, the endpoint is `wss://`. Returns the bound port.
    @discardableResult
    public func start(host: String = "127.0.0.1", port: Int = 0, tls: TLSConfiguration? = nil) async throws -> Int {
        precondition(running == nil, "the server is already running")
        self.host = host
        self.scheme = tls == nil ? "ws" : "wss"
        let core = self.core
        let heartbeatTick = min(.seconds(1), min(core.configuration.heartbeatInterval, core.configuration.heartbeatTimeout) / 4)
        let router = Router(context: SocketContext.self)
        router.ws("websocket") { inbound, outbound, context in
            let forwarded = context.request.headers[HTTPField.Name("X-Forwarded-For")!]
            let loop = context.requestContext.eventLoop
            await Self.serve(
                core: core, inbound: inbound, outbound: outbound, clientAddress: forwarded, tick: heartbeatTick,
                caughtUp: { try? await loop.submit {}.get() })
        }
        let (bound, boundContinuation) = AsyncStream<Int>.makeStream()
        let plain = HTTPServerBuilder.http1WebSocketUpgrade(
            webSocketRouter: router,
            configuration: .init(
                ws: .init(
                    maxFrameSize: 16 << 20, extensions: [.perMessageDeflate(maxDecompressedFrameSize: 16 << 20)], autoPing: .disabled,
                    closeTimeout: .seconds(2))))
        let app = Application(
            router: Router(),
            server: try tls.map { try HTTPServerBuilder.tls(plain, tlsConfiguration: $0) } ?? plain,
            configuration: .init(address: .hostname(host, port: port)),
            onServerRunning: { channel in
                boundContinuation.yield(channel.localAddress?.port ?? 0)
                boundContinuation.finish()
            },
            logger: logger
        )
        var groupConfiguration = ServiceGroupConfiguration(services: [app], gracefulShutdownSignals: [], logger: logger)
        // A stop has a deadline too: connections that have not closed by then are cancelled.
        groupConfiguration.maximumGracefulShutdownDuration = Self.stopGrace
        let group = ServiceGroup(configuration: groupConfiguration)
        // A server that cannot listen (its port is taken) ends the group: the wait below ends with it.
        let task = Task {
            defer { boundContinuation.finish() }
            try await group.run()
        }
        running = (group, task)
        var iterator = bound.makeAsyncIterator()
        guard let actual = await iterator.next(), actual != 0 else {
            task.cancel()
            let failure = await task.result
            running = nil
            if case .failure(let error) = failure { throw error }
            throw DDPError.meteor(500, "the DDP server did not start")
        }
        self.port = actual
        return actual
    }

    /// How long ``stop()`` lets connections close before it cancels them.
    static let stopGrace = Duration.seconds(5)

    /// Closes every connection and stops listening (those still open after ``stopGrace`` are
    /// cancelled). The data stays.
    public func stop() async {
        guard let (group, task) = running else { return }
        await core.closeAllConnections()
        await group.triggerGracefulShutdown()
        _ = await task.result
        running = nil
    }

    /// How many messages the writer hands to the connection's event loop before it waits for the
    /// loop to have taken them (see ``serve(core:inbound:outbound:clientAddress:tick:caughtUp:)``).
    static let writeBatch = 128

    /// One WebSocket: frames in order to the core; the core's messages out through a writer.
    ///
    /// Each frame written is a task for the connection's event loop, and a loop runs every queued
    /// task before it looks at its sockets again: a publication of 30,000 documents queued 30,000
    /// of them at once and held the loop — and every other connection on it, the bridge's probes
    /// included when the demo runs in one process — for most of a second (debug build). After each
    /// ``writeBatch`` messages the writer waits on `caughtUp` (a task on the same loop, run after
    /// the writes before it), so the loop gets to its sockets between batches.
    static func serve(
        core: ServerCore, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, clientAddress: String?, tick: Duration,
        caughtUp: @escaping @Sendable () async -> Void
    ) async {
        let (outgoing, continuation) = AsyncStream<ServerCore.Outgoing>.makeStream()
        let id = await core.connectionOpened(outbox: continuation, clientAddress: clientAddress)
        defer { continuation.finish() }
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var written = 0
                for await item in outgoing {
                    switch item {
                    case .text(let text):
                        try await outbound.write(.text(text))
                        written += 1
                        if written % Self.writeBatch == 0 { await caughtUp() }
                    case .close:
                        try? await outbound.close(.normalClosure, reason: "Normal closure")
                        throw CancellationError()
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: tick)
                    await core.heartbeat(id, now: .now)
                }
            }
            group.addTask {
                for try await message in inbound.messages(maxSize: 16 << 20) {
                    let parsed: Result<EJSON, EJSONParseError>
                    switch message {
                    case .text(var text): parsed = text.withUTF8 { bytes in Result { () throws(EJSONParseError) in try EJSONParser.parse(bytes) } }
                    case .binary(let buffer): parsed = Result { () throws(EJSONParseError) in try EJSONParser.parse(buffer.readableBytesView) }
                    }
                    await core.receive(id, parsed)
                }
                throw CancellationError()
            }
            _ = try? await group.next()
            group.cancelAll()
        }
        await core.connectionClosed(id)
    }
}

/// The WebSocket route's context: Hummingbird's basic one, plus the connection's event loop.
struct SocketContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<SocketContext>
    let eventLoop: any EventLoop

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        eventLoop = source.channel.eventLoop
    }
}
