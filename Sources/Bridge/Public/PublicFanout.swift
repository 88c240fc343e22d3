import DDP
import DDPClient
import HTTPTypes
public import Logging
import NIOCore
public import ServiceLifecycle
import Timing

/// Public fan-out: publications the operator made public (`--public-publications`) are read
/// without a session, by any number of readers, for the price of one upstream subscription per
/// distinct publication + params.
///
/// The subscriptions live on a pool of anonymous upstream connections, each an ordinary
/// ``Session`` without a token: its shared, reference-counted subscriptions (with the same
/// linger), its event pipeline and log (each change encoded once, the same bytes to every
/// reader), its streams with their filters, snapshots and `Last-Event-ID` resume. A reader's
/// stream holds a reference to its subscription while it is open.
///
/// A connection is one merged view, as in Meteor's own client, and DDP does not say which
/// subscription sent a document: readers of subscriptions placed on one connection would see the
/// union of what those publish, and each other's `ready` and `nosub`. So by default
/// (`--public-connections` 0) each distinct subscription has a connection of its own, opened for
/// it or reused once nothing of an earlier one is left there, up to `--public-max-subscriptions`;
/// a connection nothing uses is closed by the sweep. An operator who sets `--public-connections N`
/// has the subscriptions share N connections instead, and accepts the union.
///
/// Lock order: the fan-out's lock, then a pool session's lock (``Session/acquireSubscription``
/// is taken under it, so two readers of a new subscription cannot place it twice); never the
/// other way round.
public final class PublicFanout: Service, Sendable {
    struct State: Sendable {
        var connections: [Session] = []
        /// Open public streams, in all and by client address.
        var readers = 0
        var perAddress: [ClientKey: Int] = [:]
        /// The address that made each distinct public subscription still held (by its key), and
        /// how many each address made: an address's share of ``Settings/maxSubscriptions``.
        var makers: [String: ClientKey] = [:]
        var madeBy: [ClientKey: Int] = [:]
        var shuttingDown = false
    }

    public var publications: PublicPublications { settings.publications }
    /// Each distinct subscription on a connection of its own (`--public-connections` 0).
    let isolated: Bool
    let settings: Settings
    /// What one pool session may hold: the public limits in place of a user session's (the
    /// fan-out checks them first, with its own reasons).
    let poolLimits: Session.Limits
    /// Upstream connections the pool may open: one per distinct subscription when isolated.
    let connectionLimit: Int
    let logger: Logger
    let metrics: BridgeMetrics
    let pacer: ReconnectPacer
    let budget: MemoryBudget
    /// Every open stream, user and public: ended with `shutting-down` when the bridge stops.
    let streams: LiveStreams
    private let state = LockedState(State())
    private let started: AsyncStream<Session>
    private let starter: AsyncStream<Session>.Continuation

    init(
        settings: Settings, runtime: BridgeRuntime = BridgeRuntime(), logger: Logger, metrics: BridgeMetrics, pacer: ReconnectPacer,
        budget: MemoryBudget,
        streams: LiveStreams
    ) {
        self.budget = budget
        self.runtime = runtime
        self.streams = streams
        self.settings = settings
        poolLimits = Session.Limits(subscriptions: settings.maxSubscriptions, streams: settings.maxReaders)
        isolated = settings.connections == 0
        connectionLimit = isolated ? max(1, settings.maxSubscriptions) : settings.connections
        var logger = logger
        logger[metadataKey: "ddp.public"] = "true"
        self.logger = logger
        self.metrics = metrics
        self.pacer = pacer
        (started, starter) = AsyncStream<Session>.makeStream()
    }

    let runtime: BridgeRuntime

    // MARK: - Readers

    /// Counts a new reader from `address`; 503 past the readers in all, 429 past those per address.
    func admitReader(from address: ClientKey) throws(BridgeError) {
        try state.withLock { state throws(BridgeError) in
            guard !state.shuttingDown else { throw .upstreamUnavailable("The bridge is shutting down") }
            guard state.readers < settings.maxReaders else {
                throw BridgeError(
                    .tooManyPublicReaders,
                    "The bridge serves its maximum of \(settings.maxReaders) public streams", retryAfter: 30)
            }
            guard state.perAddress[address, default: 0] < settings.maxReadersPerAddress else {
                throw BridgeError(
                    .tooManyPublicStreams,
                    "This address has its maximum of \(settings.maxReadersPerAddress) public streams open", retryAfter: 10)
            }
            state.readers += 1
            state.perAddress[address, default: 0] += 1
        }
    }

    func readerLeft(from address: ClientKey) {
        state.withLock { state in
            state.readers -= 1
            let left = state.perAddress[address, default: 1] - 1
            state.perAddress[address] = left > 0 ? left : nil
        }
    }

    // MARK: - Subscriptions

    /// A reference to the public subscription for name + params (made upstream if it is new,
    /// on the connection chosen for it), ready and connected, or an error: 403/400 for what is
    /// not public, 503 past the distinct subscriptions allowed or without an upstream, 429 past
    /// those `address` may make, 504 when it does not get ready in time. Release it with
    /// ``release(_:_:)``. Params are taken with their objects' keys sorted (``DDP/EJSON/keysSorted``),
    /// so the same params written in another key order are the same subscription.
    /// Subscribes `address`'s reader (a new subscription, or a reference to the one held); returns
    /// also the connection's log position before the subscription was asked for: a live stream
    /// resuming from there gets what a session stream with `subscribe=` gets, the subscription's
    /// documents as `added` and the changes made while it got ready.
    func subscribe(_ name: String, _ params: [EJSON], from address: ClientKey) async throws -> (
        session: Session, id: String, before: UInt64
    ) {
        try publications.check(name, params)
        let params = params.map(\.keysSorted)
        let (session, id) = try place(name, params, from: address)
        do {
            try await session.waitUntilConnected(timeout: settings.connectTimeout)
        } catch {
            release(session, id)
            throw error
        }
        let before = session.logPosition()
        // On failure it drops this reader's reference itself.
        _ = try await session.startSubscription(id, name, params: params, wait: true, timeout: settings.requestTimeout)
        return (session, id, before)
    }

    func release(_ session: Session, _ id: String) { _ = session.unsubscribe(id) }

    /// A reader of a public subscription that needs nothing waited for: the subscription is held,
    /// ready, on a connection that is up, and the reader is within its limits. The reader is
    /// counted and the subscription referenced (release both as for ``subscribe(_:_:from:)``);
    /// `nil`, with nothing counted or taken, when any of that is not so: the request path then
    /// answers the reader, refusal included, as always.
    func readyReader(_ name: String, _ params: [EJSON], from address: ClientKey) -> (session: Session, id: String)? {
        guard (try? publications.check(name, params)) != nil else { return nil }
        let params = params.map(\.keysSorted)
        return state.withLock { state -> (Session, String)? in
            guard !state.shuttingDown, state.readers < settings.maxReaders,
                state.perAddress[address, default: 0] < settings.maxReadersPerAddress
            else { return nil }
            for session in state.connections {
                guard let id = session.acquireReadySubscription(name, params) else { continue }
                state.readers += 1
                state.perAddress[address, default: 0] += 1
                return (session, id)
            }
            return nil
        }
    }

    /// Finds the connection holding the subscription, or places a new one: on an unused
    /// connection while the pool has room, else on the connection with the fewest. A new one
    /// counts against `address`'s share until it is stopped.
    private func place(_ name: String, _ params: [EJSON], from address: ClientKey) throws(BridgeError) -> (Session, String) {
        try state.withLock { state throws(BridgeError) -> (Session, String) in
            guard !state.shuttingDown else { throw .upstreamUnavailable("The bridge is shutting down") }
            let refusal = { (limit: Int) in
                BridgeError(
                    .tooManyPublicSubscriptions,
                    "The bridge holds its maximum of \(limit) distinct public subscriptions (publication + params)", retryAfter: 30)
            }
            // Nothing the upstream says closes a connection for good, but one that is closed all
            // the same is left, not used: its subscriptions go with it and a new one takes its place.
            state.connections.removeAll { if case .closed = $0.connection { true } else { false } }
            if let holder = state.connections.first(where: { $0.holdsSubscription(name, params) }) {
                return (holder, try holder.acquireSubscription(name, params, limit: .max, refusal: refusal))
            }
            let counts = state.connections.map(\.subscriptionCount)
            guard counts.reduce(0, +) < settings.maxSubscriptions else { throw refusal(settings.maxSubscriptions) }
            // A new subscription loads documents: the memory budget, and this address's anonymous
            // share, must have room (what it loads is charged to the address: ``BudgetAccount``).
            try budget.admit(address, anonymous: true)
            let share = settings.maxSubscriptionsPerAddress
            guard state.madeBy[address, default: 0] < share else {
                throw BridgeError(
                    .tooManyPublicSubscriptionsFromAddress,
                    "This address made its maximum of \(share) distinct public subscriptions (publication + params) still held; read those, or retry once they are released",
                    retryAfter: max(1, Int(settings.session.subscriptionLinger.wholeSeconds) + 1))
            }
            let session: Session
            // An unused connection still charged to the address that last loaded on it (its
            // documents or its log are still held) is left to it until the sweep releases them;
            // one still holding documents of a stopped subscription (the upstream removes them
            // after the `unsub`, and more may be on the wire) is left until they are gone, or they
            // would be charged to the next address placed there, and seen by its readers.
            let reusable = { (index: Int) in
                counts[index] == 0 && state.connections[index].account.isUnclaimed && !state.connections[index].holdsDocuments
            }
            if let unused = counts.indices.first(where: reusable) {
                session = state.connections[unused]
            } else if state.connections.count < connectionLimit {
                session = Session(
                    owner: .publicPool, settings: settings.session, limits: poolLimits, runtime: runtime, logger: logger, metrics: metrics,
                    budget: budget,
                    pacer: pacer)
                state.connections.append(session)
                starter.yield(session)
                logger.info("public upstream connection opened", metadata: ["ddp.session": .string(session.id)])
            } else if isolated {
                // Every connection holds a subscription, or what an ended one left (released within
                // a sweep or two): a new subscription waits for one rather than share.
                throw BridgeError(
                    .tooManyPublicSubscriptions,
                    "Every public upstream connection (\(connectionLimit)) is in use or being released", retryAfter: 2)
            } else {
                let fewest = counts.indices.min { counts[$0] < counts[$1] } ?? 0
                session = state.connections[fewest]
            }
            let id = try session.acquireSubscription(name, params, limit: .max, refusal: refusal)
            session.account.place(address)
            state.makers[SharedSubscriptions.key(name, params)] = address
            state.madeBy[address, default: 0] += 1
            return (session, id)
        }
    }

    /// Gives each address back its share of the subscriptions no connection holds any more.
    private func forgetStopped() {
        let (released, connections) = state.withLock { state -> ([ClientKey], [Session]) in
            guard !state.makers.isEmpty else { return ([], []) }
            var released: [ClientKey] = []
            for (key, address) in state.makers where !state.connections.contains(where: { $0.holdsSubscription(key: key) }) {
                state.makers[key] = nil
                let left = state.madeBy[address, default: 1] - 1
                state.madeBy[address] = left > 0 ? left : nil
                if left <= 0 { released.append(address) }
            }
            return (released, state.connections)
        }
        // An address that holds no public subscription any more is charged with none of the
        // pool's memory (the budget's lock is not taken under the fan-out's).
        for address in released {
            for connection in connections { connection.account.release(address, from: budget) }
        }
    }

    // MARK: - Reports

    struct Report: Sendable {
        let readers: Int
        let subscriptions: Int
        let connections: [ConnectionState]
    }

    /// The pool's upstream connections (no session lock taken).
    var connectionCount: Int { state.withLock { $0.connections.count } }

    var report: Report {
        let (readers, connections) = state.withLock { ($0.readers, $0.connections) }
        return Report(
            readers: readers, subscriptions: connections.reduce(0) { $0 + $1.subscriptionCount }, connections: connections.map(\.connection))
    }

    // MARK: - Running

    /// Runs the pool's connections, stops subscriptions whose linger is over, sends heartbeats
    /// to idle readers; on shutdown closes the pool.
    public func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.sweep() }
                for await session in started {
                    await session.start()
                }
                await closeAll()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            // The readers are told the bridge is stopping before the pool's connections close
            // (which would end their streams as `session-ended`): services stop in reverse order,
            // the fan-out before the registry, which tells the same to every other stream.
            self.streams.shutDown()
            self.state.withLock { $0.shuttingDown = true }
            self.starter.finish()
        }
    }

    private func closeAll() async {
        let all = state.withLock { $0.connections }
        for session in all { await session.close(reason: "the bridge is shutting down") }
    }

    /// Stops upstream the subscriptions whose linger is over, at the runtime's clock's time
    /// (tests that move the clock call it rather than wait for the sweep).
    func releaseLingering() async {
        let now = runtime.clock.now
        let all = state.withLock { $0.connections }
        for session in all { await session.releaseLingering(now: now) }
        forgetStopped()
        await closeUnused()
    }

    /// With a connection per subscription, closes those nothing uses any more: no subscription,
    /// no document left, no address charged (a new subscription opens a connection of its own).
    private func closeUnused() async {
        guard isolated else { return }
        let unused = state.withLock { state -> [Session] in
            let unused = state.connections.filter { $0.subscriptionCount == 0 && $0.account.isUnclaimed && !$0.holdsDocuments }
            state.connections.removeAll { connection in unused.contains { $0 === connection } }
            return unused
        }
        for session in unused {
            logger.info("public upstream connection closed: nothing uses it", metadata: ["ddp.session": .string(session.id)])
            await session.close(reason: "no public subscription uses it")
        }
    }

    /// Releases lingering subscriptions (about once a second) and sends heartbeats.
    private func sweep() async {
        // Never a zero step (a zero linger is allowed): that would spin.
        let step = max(.milliseconds(50), min(.seconds(1), settings.session.subscriptionLinger / 2, settings.heartbeatInterval))
        var sinceHeartbeat = Duration.zero
        while !Task.isCancelled {
            try? await runtime.clock.sleep(for: step, on: runtime.eventLoopGroup.any())
            await releaseLingering()
            let all = state.withLock { $0.connections }
            sinceHeartbeat += step
            if sinceHeartbeat >= settings.heartbeatInterval {
                sinceHeartbeat = .zero
                for session in all { session.heartbeat() }
            }
        }
    }
}
