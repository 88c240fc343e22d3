import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP proxy on loopback that injects faults between a client and its server: it kills
/// every connection, stalls them (no bytes either way for a while), or truncates them (the
/// next chunk from the server is cut in half, then both sides close). For fault campaigns.
public final class FaultProxy: Sendable {
    public enum Fault: String, Sendable, CaseIterable {
        case kill, stall, truncate
    }

    private struct Pair {
        let client: any Channel
        let server: any Channel
    }

    private struct State {
        var listener: (any Channel)?
        var pairs: [ObjectIdentifier: Pair] = [:]
        var truncating = false
        var accepted = 0
        var faults: [Fault: Int] = [:]
    }

    private let targetHost: String
    private let targetPort: Int
    private let state = NIOLockedValueBox(State())

    public init(targetHost: String = "127.0.0.1", targetPort: Int) {
        self.targetHost = targetHost
        self.targetPort = targetPort
    }

    public var port: Int { state.withLockedValue { $0.listener?.localAddress?.port ?? 0 } }
    /// Connections accepted so far.
    public var accepted: Int { state.withLockedValue { $0.accepted } }
    /// Faults injected so far, by kind.
    public var faults: [Fault: Int] { state.withLockedValue { $0.faults } }
    public var openPairs: Int { state.withLockedValue { $0.pairs.count } }

    public func start() async throws {
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { client in
                self.state.withLockedValue { $0.accepted += 1 }
                return self.connect(client)
            }
            .bind(host: "127.0.0.1", port: 0).get()
        state.withLockedValue { $0.listener = listener }
    }

    public func stop() async {
        let (listener, pairs) = state.withLockedValue { state in
            defer {
                state.listener = nil
                state.pairs = [:]
            }
            return (state.listener, Array(state.pairs.values))
        }
        try? await listener?.close()
        for pair in pairs {
            pair.client.close(promise: nil)
            pair.server.close(promise: nil)
        }
    }

    /// Injects one fault now; a stall lasts `stall` before the bytes flow again.
    public func inject(_ fault: Fault, stall: Duration = .milliseconds(300)) async {
        state.withLockedValue { $0.faults[fault, default: 0] += 1 }
        switch fault {
        case .kill:
            for pair in state.withLockedValue({ Array($0.pairs.values) }) { pair.client.close(promise: nil) }
        case .truncate:
            state.withLockedValue { $0.truncating = true }
        case .stall:
            let pairs = state.withLockedValue { Array($0.pairs.values) }
            for pair in pairs {
                pair.client.setOption(.autoRead, value: false).whenComplete { _ in }
                pair.server.setOption(.autoRead, value: false).whenComplete { _ in }
            }
            // The fault itself: no bytes flow for `stall`.
            try? await Task.sleep(for: stall)
            for pair in pairs {
                pair.client.setOption(.autoRead, value: true).whenComplete { _ in }
                pair.server.setOption(.autoRead, value: true).whenComplete { _ in }
            }
        }
    }

    /// Connects the accepted client to the target and glues the two together.
    private func connect(_ client: any Channel) -> EventLoopFuture<Void> {
        ClientBootstrap(group: client.eventLoop)
            .channelOption(.autoRead, value: false)
            .connect(host: targetHost, port: targetPort)
            .flatMap { server in
                let key = ObjectIdentifier(client)
                self.state.withLockedValue { $0.pairs[key] = Pair(client: client, server: server) }
                // Whichever side closes, the other follows (a callback on a future already
                // completed runs at once: a client that left while connecting closes the server).
                client.closeFuture.whenComplete { _ in
                    server.close(promise: nil)
                    self.state.withLockedValue { _ = $0.pairs.removeValue(forKey: key) }
                }
                server.closeFuture.whenComplete { _ in client.close(promise: nil) }
                let toServer = Glue(partner: server, proxy: nil)
                let toClient = Glue(partner: client, proxy: self)
                return client.pipeline.addHandler(toServer).flatMap { server.pipeline.addHandler(toClient) }.flatMap {
                    client.setOption(.autoRead, value: true).flatMap { server.setOption(.autoRead, value: true) }
                }
            }
            .flatMapError { error in
                client.close(promise: nil)
                return client.eventLoop.makeFailedFuture(error)
            }
    }

    /// Takes the pending truncation, if any (each truncation cuts one chunk of one connection).
    fileprivate func takeTruncation() -> Bool {
        state.withLockedValue { state in
            defer { state.truncating = false }
            return state.truncating
        }
    }
}

/// Forwards what one side reads to the other; closes the other when this side closes. On the
/// server side (with `proxy`), a pending truncation forwards half a chunk and closes both.
private final class Glue: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let partner: any Channel
    private let proxy: FaultProxy?

    init(partner: any Channel, proxy: FaultProxy?) {
        self.partner = partner
        self.proxy = proxy
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if let proxy, proxy.takeTruncation(), let half = buffer.readSlice(length: buffer.readableBytes / 2) {
            let partner = self.partner
            partner.writeAndFlush(half).whenComplete { _ in partner.close(promise: nil) }
            context.close(promise: nil)
            return
        }
        partner.writeAndFlush(buffer, promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
