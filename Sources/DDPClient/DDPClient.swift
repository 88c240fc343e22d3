public import DDP
import Foundation
public import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Timing

/// A DDP client connection over a WebSocket: the I/O shell around
/// ``DDP/DDPConnectionStateMachine``. From ``start(whenStopped:)`` until ``close(reason:)`` it connects, reconnects
/// with backoff (paced by the shared ``ReconnectPacer``), answers pings, and reports what
/// happens to its ``DDPClientEventSink``, synchronously, on this actor and in order (no buffer
/// between the connection and its owner; the sink's protocol states the contract).
///
/// The client runs on its event loop: the loop is the actor's executor, and every attempt's
/// channel is made on it. The WebSocket is a channel handler (``UpstreamFrameHandler``) that
/// hands each message to the actor on the loop, and the actor writes each message to the
/// channel, with no task and no hop between them. The heartbeat tick is a repeated timer, each
/// deadline a timer, on the same loop; they, and a caller's cancellation, run on the actor with
/// no task (docs/ARCHITECTURE.md, "The upstream WebSocket").
///
/// Every wait has a deadline and ends when its caller is cancelled: calls and subscriptions
/// wait on continuations that a reply, a timer (one NIO scheduled task, no child tasks) or
/// the cancellation handler resumes; a call that ends on this side leaves the state machine
/// too (``DDP/DDPConnectionStateMachine/abandonMethod(_:)``), so it blocks nothing behind it.
/// Each attempt's TCP, TLS and WebSocket upgrade run under one deadline (`UpstreamChannel`).
/// The connect-and-reconnect loop itself needs no task (``start(whenStopped:)``); ``run()``
/// waits for it, for an owner that has a task to give.
public actor DDPClient {
    /// How a method call waits.
    public enum Completion: Sendable {
        /// Until `result` and `updated`: the call's writes are visible (read-your-writes).
        case dataVisible
        /// Until `result` only.
        case result
    }

    struct MethodWaiter {
        let completion: Completion
        let continuation: CheckedContinuation<EJSON?, any Error>
        let timer: BridgeClock.Timer?
    }

    struct ReadyWaiter {
        let number: Int
        let continuation: CheckedContinuation<Void, any Error>
        let timer: BridgeClock.Timer?
    }

    public let options: DDPClientOptions
    /// The loop this actor and its connection's channel run on.
    public nonisolated let eventLoop: any EventLoop
    private let logger: Logger
    private let sink: any DDPClientEventSink
    var machine: DDPConnectionStateMachine
    /// The open WebSocket's channel: each message sent is one write to it, on this loop.
    private var transport: (any Channel)?
    var methodWaiters: [String: MethodWaiter] = [:]
    var readyWaiters: [String: [ReadyWaiter]] = [:]
    var nextWaiter = 0
    /// Recent `nosub` errors by subscription id (bounded), for waiters that arrive after it.
    var recentStops: [String: DDPFailure] = [:]
    private var recentStopOrder: [String] = []
    private var reconnectDelay: Duration?
    private var closed = false
    /// The pause between attempts: what follows it, run by its timer or at once by ``close(reason:)``.
    private var pause: (next: @Sendable (isolated DDPClient) -> Void, timer: BridgeClock.Timer?)?
    /// Numbers each pause: a pause's timer wakes that pause only. A timer cancelled when its pause
    /// ended early may still run (NIO runs a task it has already taken off its queue for this
    /// turn), and it would end the next pause, the pacer's slot, before its time.
    private var pauseNumber = 0
    /// The pause is a backoff after a drop (which the upstream's return, or a request, may cut
    /// short), not the pacer's slot.
    private var inBackoff = false
    private var started = false
    /// The connect-and-reconnect loop has stopped (after ``close(reason:)``).
    private var stopped = false
    private var stopWaiters: [CheckedContinuation<Void, Never>] = []
    private var stopActions: [@Sendable (isolated DDPClient) -> Void] = []
    /// Observers waiting for a condition on the client (``waitUntil(timeout:_:)``).
    var conditionWaiters: [Int: ConditionWaiter] = [:]
    var nextConditionWaiter = 0
    /// The channel of the attempt in progress, closed from outside when the client closes.
    private var attempt: ChannelHandle?
    /// Drives ``DDP/DDPConnectionStateMachine/tick(at:)`` while a transport is open.
    private var ticker: RepeatingTimer?
    /// Warnings an upstream can repeat with every message, held back (``warn(_:_:metadata:at:)``).
    private var warnings = WarningThrottle<RepeatedWarning>(interval: DDPClient.warningInterval)
    enum RepeatedWarning: Hashable { case unreadableMessage, protocolError }
    /// At most one warning of a kind the upstream can repeat is logged per interval.
    static let warningInterval: Duration = .seconds(10)
    public private(set) var state: ConnectionState = .idle

    /// The actor runs on its event loop (see the type's description).
    public nonisolated var unownedExecutor: UnownedSerialExecutor { eventLoop.executor.asUnownedSerialExecutor() }

    public init(
        options: DDPClientOptions, logger: Logger, events sink: any DDPClientEventSink = DiscardingEventSink(),
        eventLoop: (any EventLoop)? = nil
    ) {
        self.options = options
        // The loop is the actor's executor: one that is not a serial executor itself (not NIO's
        // own loops) would give a short-lived wrapper as the executor, so the group's is taken.
        self.eventLoop = eventLoop.flatMap { $0 as? any NIOSerialEventLoopExecutor } ?? MultiThreadedEventLoopGroup.singleton.any()
        var logger = logger
        logger[metadataKey: "ddp.url"] = .string(options.url)
        self.logger = logger
        self.sink = sink
        self.machine = DDPConnectionStateMachine(configuration: options.protocolConfiguration, upstream: options.url)
    }

    // MARK: - Reading state

    /// Reads the merged document view inside the actor, without copying it: the view holds
    /// exactly the changes delivered to the sink so far (see ``DDPClientEventSink``).
    public func withCache<T: Sendable>(_ body: (DocumentCache) throws -> T) rethrows -> T { try body(machine.cache) }
    /// A copy of one collection of the merged view (O(1): copy-on-write), to read outside the actor.
    public func collection(_ name: String) -> DocumentCache.Collection? { machine.cache.collections[name] }
    /// The same, with an index of each of `fields`. One the view keeps is used as it is; a
    /// missing one is built here, on the caller's task and outside the actor (sorting a field's
    /// values of every document is data-sized work, and the actor runs on an event loop), then
    /// handed back to be kept up by later changes.
    public nonisolated func collection(_ name: String, indexing fields: [String]) async -> DocumentCache.Collection? {
        guard !fields.isEmpty else { return await collection(name) }
        guard var (collection, builds) = await indexing(name, fields: fields) else { return nil }
        for build in builds {
            let index = FieldIndex(field: build.field, documents: collection.documents, at: options.clock.now)
            collection.use(index)
            if build.canBeKept { await keep(index, in: name, build: build, builtFrom: collection.documents) }
        }
        return collection
    }

    private func indexing(_ name: String, fields: [String]) -> (collection: DocumentCache.Collection, builds: [IndexBuild])? {
        machine.indexing(name, fields: fields, at: options.clock.now)
    }

    private func keep(_ index: FieldIndex, in name: String, build: IndexBuild, builtFrom documents: DocumentMap) {
        machine.keep(index, in: name, build: build, builtFrom: documents, at: options.clock.now)
    }
    public var userID: String? { machine.userID }
    public var loginToken: String? { machine.loginToken }
    public var tokenExpires: Double? { machine.tokenExpires }
    public var subscriptions: [String: DDPConnectionStateMachine.Subscription] { machine.subscriptions }
    public var isConnected: Bool { machine.isConnected }
    /// The merged view's estimated memory (``DDP/DocumentCache/estimatedBytes``).
    public var cachedBytes: Int { machine.cache.estimatedBytes }

    /// Stops the subscriptions still loading (or the newest) with `error`: for a limit the owner
    /// keeps, from its sink (``DDP/DDPConnectionStateMachine/stopLoading(_:warning:)``).
    public func stopLoading(_ error: DDPClientError, warning: String) {
        perform(machine.stopLoading(error, warning: warning))
    }
    /// After a reconnect, until every subscription is ready again: the view is not live yet.
    public var isResyncing: Bool { machine.isWaitingForQuiescence }

    // MARK: - Running

    /// Connects and keeps the connection up until ``close(reason:)`` or cancellation (which
    /// closes it with the reason "stopped"). The connection itself needs no task: this only waits
    /// for ``start(whenStopped:)``'s loop to stop.
    public func run() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                guard !stopped else { return continuation.resume() }
                stopWaiters.append(continuation)
                start()
            }
        } onCancel: {
            onLoop { $0.close(reason: "stopped") }
        }
    }

    /// Starts connecting, and reconnecting after each drop (with backoff, paced by the shared
    /// ``ReconnectPacer``), until ``close(reason:)``, with no task: each attempt, pause and
    /// reconnect is a callback or a timer on this loop. `whenStopped` runs on the actor once the
    /// loop has stopped. A second call only adds its `whenStopped`.
    public func start(whenStopped: (@Sendable (isolated DDPClient) -> Void)? = nil) {
        if let whenStopped {
            if stopped { return whenStopped(self) }
            stopActions.append(whenStopped)
        }
        guard !started else { return }
        started = true
        perform(machine.start())
        connectNext()
    }

    /// Closes for good: pending calls fail, the loop stops (an attempt still connecting is cut).
    public func close(reason: String = "closed") {
        perform(machine.close(reason: reason))
        closed = true
        interrupt()
        // Not started, or between attempts with nothing pending: stopped now.
        if attempt == nil && pause == nil { stop() }
    }

    /// Wakes a pause and cuts the attempt in progress.
    private func interrupt() {
        attempt?.close()
        wake()
    }

    /// Waits `delay` on a timer, then runs `next`; ``close(reason:)`` runs it at once.
    private func pause(for delay: Duration, then next: @escaping @Sendable (isolated DDPClient) -> Void) {
        guard delay > .zero, !closed else { return next(self) }
        pauseNumber += 1
        let number = pauseNumber
        pause = (next, timer(delay) { $0.wake(number) })
    }

    /// Ends the pause now: the one numbered `number` only, when given (its timer).
    private func wake(_ number: Int? = nil) {
        guard let current = pause, number.map({ $0 == pauseNumber }) ?? true else { return }
        pause = nil
        if inBackoff {
            inBackoff = false
            options.pacer.forget(ObjectIdentifier(self))
        }
        current.timer?.cancel()
        current.next(self)
    }

    /// The loop's end: closed (if it was not), and whoever waits for it told.
    private func stop() {
        guard !stopped else { return }
        stopped = true
        if !closed {
            perform(machine.close(reason: "stopped"))
            closed = true
        }
        for waiter in stopWaiters { waiter.resume() }
        stopWaiters = []
        let actions = stopActions
        stopActions = []
        for action in actions { action(self) }
    }

    private func connectNext() {
        guard !closed else { return stop() }
        let maxSize = options.maxMessageSize
        let handle = ChannelHandle()
        attempt = handle
        let ended: EventLoopFuture<UpstreamTransportError?>
        var address: UpstreamAddress?
        do {
            let target = try UpstreamAddress(options.url)
            address = target
            let sslContext = try makeTLSConfiguration(target).map { try NIOSSLContext(configuration: $0) }
            let upstream = UpstreamChannel(
                target: target, headers: options.handshakeHeaders, compression: options.compression, maxMessageSize: maxSize,
                sslContext: sslContext, handshakeTimeout: options.protocolConfiguration.connectTimeout, clock: options.clock, handle: handle,
                client: self, resolver: options.resolver
            )
            ended = upstream.connect(on: eventLoop, logger: logger)
        } catch {
            ended = eventLoop.makeFailedFuture(error)
        }
        let target = address
        ended.whenComplete { result in self.assumeIsolated { $0.attemptEnded(result, handle, target) } }
    }

    /// The attempt ended: its cause, classified (``DDP/UpstreamFailure``), goes to the state
    /// machine, which says why in the `reconnecting` state (and the failure log logs it once).
    private func attemptEnded(_ result: Result<UpstreamTransportError?, any Error>, _ handle: ChannelHandle, _ address: UpstreamAddress?) {
        // The WebSocket was open: the DDP handshake, or the connection, is what ended.
        let stage: UpstreamFailure.Stage = machine.isConnected ? .open : handle.stage
        let timeout = options.protocolConfiguration.connectTimeout
        let failure: UpstreamFailure
        switch result {
        case .success(nil):
            failure = UpstreamFailure(.closed(stage), url: options.url)
        case .success(let error?):
            logger.debug("upstream connection ended", metadata: ["error": "\(error)"])
            failure = .classify(error, stage: stage, address: address, timeout: timeout, url: options.url)
        case .failure(let error):
            logger.debug("upstream connection ended", metadata: ["error": "\(error)"])
            failure = .classify(error, stage: stage, address: address, timeout: timeout, url: options.url)
        }
        // Whatever ended the attempt (a declined or failed upgrade too), its socket goes.
        handle.close()
        attempt = nil
        ticker?.cancel()
        ticker = nil
        transport = nil
        perform(machine.transportClosed(at: options.clock.now, unit: Double.random(in: 0..<1), failure: failure))
        guard !closed, let delay = reconnectDelay else { return stop() }
        reconnectDelay = nil
        backOff(for: delay) { client in
            // After an outage every session wants back at once: take a paced slot.
            client.pause(for: client.options.pacer.reserve()) { client in
                guard !client.closed else { return client.stop() }
                client.perform(client.machine.reconnectTimerFired())
                client.connectNext()
            }
        }
    }

    /// A backoff: a pause that ends early when another connection of the process is connected
    /// again (``ReconnectPacer/upstreamReturned()``) or a request asks (``retrySoon()``).
    private func backOff(for delay: Duration, then next: @escaping @Sendable (isolated DDPClient) -> Void) {
        guard delay > .zero, !closed else { return next(self) }
        pauseNumber += 1
        let number = pauseNumber
        pause = (next, timer(delay) { $0.wake(number) })
        inBackoff = true
        options.pacer.waitForReturn(ObjectIdentifier(self)) { [weak self] in self?.retrySoon() }
    }

    /// Ends a backoff now: the next attempt takes its paced slot and goes. Nothing happens while
    /// connected, connecting, or already waiting for the slot. For a request that needs the
    /// upstream: it should not wait out a backoff that grew while the upstream was away.
    public nonisolated func retrySoon() {
        eventLoop.execute { self.assumeIsolated { $0.endBackoff() } }
    }

    private func endBackoff() {
        guard inBackoff else { return }
        wake()
    }

    private func makeTLSConfiguration(_ address: UpstreamAddress) -> TLSConfiguration? {
        guard address.secure else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = options.tls.caFile { tls.trustRoots = .file(caFile) }
        if options.tls.allowSelfSigned { tls.certificateVerification = .none }
        return tls
    }

    private static func tickInterval(_ configuration: DDPClientConfiguration) -> Duration {
        min(.seconds(1), min(configuration.heartbeatInterval, configuration.heartbeatTimeout, configuration.connectTimeout) / 4)
    }

    /// The WebSocket is open (called by its channel, on this loop, before any message arrives).
    func transportOpened(_ channel: any Channel) {
        transport = channel
        // Heartbeats and deadlines: a NIO repeated timer on this loop while the transport is open.
        let tick = max(.milliseconds(5), Self.tickInterval(options.protocolConfiguration))
        ticker?.cancel()
        ticker = options.clock.repeating(every: tick, on: eventLoop) { [weak self] in
            self?.assumeIsolated { $0.tick() }
        }
        if closed { attempt?.close() }
        perform(machine.transportOpened(at: options.clock.now))
    }

    private func tick() { perform(machine.tick(at: options.clock.now)) }

    /// One whole message from the WebSocket (called by its channel, on this loop). One from a
    /// channel that is no longer this client's transport (an earlier attempt's) is dropped.
    func transportReceived(_ message: ByteBuffer, on channel: any Channel) {
        guard channel === transport else { return }
        let now = options.clock.now
        let decoded = Result {
            try message.withUnsafeReadableBytes { try ServerMessage.decode(EJSONParser.parse($0.bindMemory(to: UInt8.self))) }
        }
        switch decoded {
        case .success(let message?):
            logger.trace("received", metadata: ["ddp.msg": "\(message.loggable)"])
            perform(machine.received(message, at: now), receivedAt: now)
        case .success(nil):
            break
        case .failure(let error):
            warn(.unreadableMessage, "ignored an unreadable message from the upstream", metadata: ["error": "\(error)"], at: now)
        }
    }

    /// Logs a warning the upstream can repeat with every message, held back by ``warnings``: the
    /// first of its kind, then at most one per ``warningInterval``, with how many were held back.
    private func warn(_ kind: RepeatedWarning, _ message: Logger.Message, metadata: Logger.Metadata, at now: ContinuousClock.Instant) {
        guard let heldBack = warnings.admit(kind, at: now) else { return }
        var metadata = metadata
        if heldBack > 0 { metadata["ddp.suppressed"] = "\(heldBack)" }
        logger.warning(message, metadata: metadata)
    }

    // MARK: - Timers

    /// One timer per deadline, on the options' clock (``Timing/BridgeClock/schedule(after:on:_:)``)
    /// and this client's loop; when it fires, `body` runs on the actor there, with no task.
    func timer(_ timeout: Duration?, _ body: @escaping @Sendable (isolated DDPClient) -> Void) -> BridgeClock.Timer? {
        timeout.map { delay in options.clock.schedule(after: delay, on: eventLoop) { self.assumeIsolated(body) } }
    }

    /// Runs `body` on the actor from outside it (a cancellation handler), as one job of the loop.
    nonisolated func onLoop(_ body: @escaping @Sendable (isolated DDPClient) -> Void) {
        eventLoop.execute { self.assumeIsolated(body) }
    }

    // MARK: - Performing actions

    private func deliver(_ event: DDPClientEvent) { sink.receive(event, on: self) }

    /// `receivedAt`: when the message the actions answer arrived (warnings it causes are held
    /// back by that instant), `nil` for actions no message caused.
    func perform(_ actions: [DDPConnectionStateMachine.Action], receivedAt: ContinuousClock.Instant? = nil) {
        for action in actions {
            switch action {
            case .openTransport:
                break  // run() opens the next transport
            case .send(let message):
                logger.trace("sending", metadata: ["ddp.msg": "\(message.loggable)"])
                transport?.writeAndFlush(ByteBuffer(bytes: message.encode()), promise: nil)
            case .closeTransport:
                attempt?.close()
            case .scheduleReconnect(let delay):
                reconnectDelay = delay
            case .stateChanged(let newState):
                // Back: whoever is still waiting out a backoff retries now.
                if case .connected = newState { options.pacer.upstreamReturned() }
                state = newState
                logger.debug("connection state", metadata: ["ddp.state": "\(newState)"])
                switch newState {
                case .reconnecting(_, _, let failure?): options.failureLog.failed(failure, logger: logger)
                case .connected: options.failureLog.connected(logger: logger)
                default: break
                }
                deliver(.stateChanged(newState))
            case .methodResult(let id, let outcome):
                if let waiter = methodWaiters[id], waiter.completion == .result {
                    methodWaiters[id] = nil
                    waiter.timer?.cancel()
                    waiter.continuation.resume(with: outcome.mapError(\.error))
                }
            case .methodCompleted(let id, let outcome):
                if let waiter = methodWaiters.removeValue(forKey: id) {
                    waiter.timer?.cancel()
                    waiter.continuation.resume(with: outcome.mapError(\.error))
                }
            case .subscriptionReady(let id):
                resumeReadyWaiters(id, .success(()))
                deliver(.subscriptionReady(id: id))
            case .subscriptionStopped(let id, let error):
                if let error {
                    recentStops[id] = error
                    recentStopOrder.append(id)
                    if recentStopOrder.count > 256 { recentStops[recentStopOrder.removeFirst()] = nil }
                }
                resumeReadyWaiters(
                    id, .failure(error?.error ?? DDPClientError(.subscriptionStopped, "The subscription stopped before it was ready")))
                deliver(.subscriptionStopped(id: id, error: error))
            case .documentsChanged(let changes):
                deliver(.documentsChanged(changes))
            case .loginChanged(let login):
                deliver(.loginChanged(login))
            case .resumeRefused(let error):
                let outcome = options.protocolConfiguration.closesWhenLoginIsLost ? "the connection closes" : "the connection is anonymous now"
                logger.info("the upstream refused the resume token; \(outcome)", metadata: ["error": "\(error.error)"])
                deliver(.resumeRefused(error))
            case .protocolError(let reason, _):
                if let receivedAt {
                    warn(.protocolError, "the upstream reported a protocol error", metadata: ["reason": "\(reason)"], at: receivedAt)
                } else {
                    logger.warning("the upstream reported a protocol error", metadata: ["reason": "\(reason)"])
                }
                deliver(.protocolError(reason: reason))
            case .warning(let text):
                logger.warning("\(text)")
            }
        }
        if case .closed = state {
            // Closed by the owner, or by the machine itself (a lost login): no attempt follows.
            closed = true
            let failure = machine.closedFailure ?? .connectionClosed("The connection is closed")
            for (_, waiter) in methodWaiters {
                waiter.timer?.cancel()
                waiter.continuation.resume(throwing: failure)
            }
            methodWaiters = [:]
            for id in Array(readyWaiters.keys) { resumeReadyWaiters(id, .failure(failure)) }
        }
        resumeConditionWaiters()
    }
}
