import DDP
import Foundation
import HTTPTypes
import Logging
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// Bounds the client connections the bridge holds open: in all, so descriptors are left for the
/// upstream connections, the session store and the listener (`--max-connections`; by default the
/// open-file limit less a reserve, less the upstream connections the sessions hold at the time),
/// and per client address (`--max-connections-per-address`), so
/// one client's idle connections cannot take what everyone else needs (1,100 idle connections
/// from one address under `ulimit -n 1024` stopped `/healthz` for everyone).
///
/// The direct peer is the address, counted by its ``ClientKey`` (an IPv6 peer by its /64): a
/// trusted proxy's connections (`--trusted-proxies`) carry many clients and count only in the total. A connection past a bound gets a short HTTP answer
/// (429 or 503, `Connection: close`) and is closed at once, before it holds anything else.
///
/// An idle kept-alive connection holds memory too (``connectionCost``): both bounds are at most
/// what the memory budget (``MemoryBudget``) has room for, the total's and an address's share, so
/// connections cannot hold what the budget keeps for documents.
final class ConnectionAdmission: Sendable {
    enum Decision: Equatable {
        case admitted
        case tooManyFromAddress
        case tooMany
    }

    private struct State {
        var open = 0
        var perAddress: [ClientKey: Int] = [:]
    }

    let limit: Int
    let perAddressLimit: Int
    /// Descriptors held for other things, counted against ``limit`` (the upstream connections).
    private let held: @Sendable () -> Int
    private let exempt: @Sendable (String) -> Bool
    /// The key a peer's address is counted by (``ClientIdentity/key(_:)``).
    private let key: @Sendable (String) -> ClientKey
    private let state = LockedState(State())

    init(
        limit: Int, perAddressLimit: Int, held: @escaping @Sendable () -> Int, exempt: @escaping @Sendable (String) -> Bool,
        key: @escaping @Sendable (String) -> ClientKey
    ) {
        self.limit = limit
        self.perAddressLimit = perAddressLimit
        self.held = held
        self.exempt = exempt
        self.key = key
    }

    /// The part of the configuration admission uses.
    struct Limits: Sendable, Equatable {
        /// Connections in all (`--max-connections`); `nil`: the open-file limit less a reserve,
        /// less the upstream connections open at the time.
        var total: Int?
        var perAddress: Int
        /// How a peer's address is keyed, and which peers are trusted proxies (exempt from the
        /// per-address bound).
        var clients: ClientIdentity
    }

    /// `upstream`: the upstream connections open now (sessions, the public pool, the probe).
    convenience init(limits: Limits, budget: MemoryBudget, upstream: @escaping @Sendable () -> Int) {
        let files: Int = limits.total ?? ConnectionAdmission.defaultLimit(openFiles: ConnectionAdmission.openFileLimit())
        let limit = min(files, Self.fitting(budget.limit))
        var held: @Sendable () -> Int = upstream
        if limits.total != nil { held = { 0 } }
        let clients = limits.clients
        self.init(
            limit: limit, perAddressLimit: min(limits.perAddress, Self.fitting(budget.addressShare)), held: held,
            exempt: { clients.isTrustedProxy($0) }, key: { clients.key($0) })
    }

    /// What an idle kept-alive connection holds: its pipeline, buffers and task (measured by the
    /// benchmark's public part, docs/PERFORMANCE.md).
    static let connectionCost = 28 << 10

    /// How many connections `bytes` of the memory budget hold, at least 16 (a budget too small for
    /// that still serves a client, its probes and a few streams).
    static func fitting(_ bytes: Int) -> Int { max(16, bytes / connectionCost) }

    var openConnections: Int { state.withLock { $0.open } }

    func admit(_ address: String) -> Decision {
        let counted: ClientKey? = exempt(address) ? nil : key(address)
        let others = held()
        return state.withLock { state in
            guard state.open + others < limit else { return .tooMany }
            if let counted {
                guard state.perAddress[counted, default: 0] < perAddressLimit else { return .tooManyFromAddress }
                state.perAddress[counted, default: 0] += 1
            }
            state.open += 1
            return .admitted
        }
    }

    func release(_ address: String) {
        let counted: ClientKey? = exempt(address) ? nil : key(address)
        state.withLock { state in
            state.open -= 1
            if let counted {
                let left = state.perAddress[counted, default: 1] - 1
                state.perAddress[counted] = left > 0 ? left : nil
            }
        }
    }

    /// The answer written to a refused connection before it is closed.
    static func refusal(_ decision: Decision) -> ByteBuffer {
        let error =
            decision == .tooManyFromAddress
            ? BridgeError(.tooManyConnectionsFromAddress, "This address has its maximum of connections open")
            : BridgeError(.tooManyConnections, "The bridge holds its maximum of connections")
        let body = EJSONWriter.encode(error.body)
        var answer = ByteBuffer(
            string: "HTTP/1.1 \(error.status.code) \(error.status.reasonPhrase)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.count)\r\nRetry-After: 5\r\nConnection: close\r\n\r\n")
        answer.writeBytes(body)
        return answer
    }

    // MARK: - Descriptors

    /// The descriptors client and upstream connections may take together: all but a reserve for
    /// the store, the listener, logs and the connections being opened.
    static func defaultLimit(openFiles: Int) -> Int {
        let reserve = min(max(64, openFiles / 32), 1_024)
        return max(16, openFiles - reserve)
    }

    /// The soft open-file limit (after ``raiseOpenFileLimit()``).
    static func openFileLimit() -> Int {
        var limits = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return 1024 }
        return limits.rlim_cur == rlim_t.max ? 1 << 20 : Int(clamping: limits.rlim_cur)
    }

    /// Raises the soft open-file limit to the hard one (the default soft limit, often 1024, is
    /// far below what a bridge with thousands of sessions needs); returns (before, after).
    @discardableResult
    static func raiseOpenFileLimit() -> (before: Int, after: Int) {
        var limits = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return (0, 0) }
        let before = Int(clamping: limits.rlim_cur)
        guard limits.rlim_cur < limits.rlim_max else { return (before, before) }
        var raised = limits
        raised.rlim_cur = limits.rlim_max
        guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 else { return (before, before) }
        return (before, openFileLimit())
    }
}

/// First in a refused connection's pipeline: writes the refusal, drops whatever the client sends
/// (nothing reaches the HTTP server) and closes.
final class RefusedConnection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private let answer: ByteBuffer
    private var refused = false

    init(_ decision: ConnectionAdmission.Decision) { answer = ConnectionAdmission.refusal(decision) }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        refuse(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    private func refuse(_ context: ChannelHandlerContext) {
        guard !refused else { return }
        refused = true
        let channel = context.channel
        context.writeAndFlush(NIOAny(answer)).whenComplete { _ in channel.close(promise: nil) }
    }
}
