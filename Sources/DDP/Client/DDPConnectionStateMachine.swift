/// The protocol logic of one DDP client connection, as Meteor's own client behaves
/// (`ddp-client/common/livedata_connection.js`): version negotiation, heartbeats, methods
/// in blocks with `wait`, subscriptions, the merged document view, login state and
/// reconnection with quiescence. No I/O: each event returns the actions the shell performs.
public struct DDPConnectionStateMachine: Sendable {
    public typealias Instant = ContinuousClock.Instant

    public let configuration: DDPClientConfiguration
    /// The URL this connection goes to, named in the failures it reports (their hints may correct it).
    public let upstream: String?
    private(set) var phase: Phase = .idle
    public private(set) var version: String
    public private(set) var sessionID: String?
    /// Attempts since the last successful connection.
    private(set) var attempt = 0
    private var everConnected = false
    private var lastReceived: Instant?
    private var pingSentAt: Instant?
    /// When the current connection got `connected` (the backoff resets only once it stayed up).
    private var connectedAt: Instant?
    /// When the current attempt opened its transport (the DDP handshake has a deadline).
    private var openedAt: Instant?
    /// Why this side is closing the current transport (an unusable `failed`, a deadline), for
    /// the `reconnecting` state that follows.
    private var closingBecause: UpstreamFailure?
    /// A `failed` already moved us to another version since the last `connected`.
    private var renegotiated = false

    private var methods: [String: MethodCall] = [:]
    private var blocks: [MethodBlock] = []
    private var nextMethodID = 1
    private var nextSubID = 1
    public private(set) var subscriptions: [String: Subscription] = [:]
    private var subscriptionOrder: [String] = []
    private var reset: Reset?
    /// Subscriptions were stopped for the document limit and the cache is not yet back under it.
    private var documentLimitStopPending = false

    /// The merged document view (what consumers see; excludes data buffered during a reset).
    public private(set) var cache = DocumentCache()

    /// One collection of the merged view with the indexes of `fields` it keeps, and a build for
    /// each missing one, to be made by the caller outside the owner
    /// (``DocumentCache/indexing(_:fields:at:)``).
    public mutating func indexing(_ name: String, fields: [String], at now: ContinuousClock.Instant) -> (
        collection: DocumentCache.Collection, builds: [IndexBuild]
    )? {
        cache.indexing(name, fields: fields, at: now)
    }

    /// Keeps an index built outside the owner, brought up to date (``DocumentCache/keep(_:in:build:builtFrom:at:)``).
    @discardableResult
    public mutating func keep(
        _ index: FieldIndex, in name: String, build: IndexBuild, builtFrom documents: DocumentMap, at now: ContinuousClock.Instant
    ) -> Bool {
        cache.keep(index, in: name, build: build, builtFrom: documents, at: now)
    }
    public private(set) var userID: String?
    public private(set) var loginToken: String?
    public private(set) var tokenExpires: Double?
    /// What calls fail with once the connection is closed: the cause given to ``close(reason:)``
    /// (`connection-closed`), or `login-lost` (``DDPClientConfiguration/closesWhenLoginIsLost``).
    public private(set) var closedFailure: DDPClientError?

    public init(configuration: DDPClientConfiguration = DDPClientConfiguration(), upstream: String? = nil) {
        precondition(!configuration.supportedVersions.isEmpty, "at least one DDP version must be supported")
        self.configuration = configuration
        self.upstream = upstream
        self.version = configuration.supportedVersions[0]
    }

    public var isConnected: Bool { phase == .connected }
    public var isWaitingForQuiescence: Bool { reset != nil }
    /// Attempts since the connection last stayed up for ``DDPClientConfiguration/healthyAfter``.
    public var failedAttempts: Int { attempt }
    public var pendingMethodCount: Int { methods.count }

    // MARK: - Lifecycle events

    /// The owner starts the connection.
    public mutating func start() -> [Action] {
        guard phase == .idle else { return [] }
        phase = .connecting
        return [.stateChanged(.connecting(attempt: 0)), .openTransport]
    }

    /// The WebSocket is open: offer our versions.
    public mutating func transportOpened(at now: Instant) -> [Action] {
        guard phase == .connecting else { return [] }
        lastReceived = now
        openedAt = now
        pingSentAt = nil
        closingBecause = nil
        return [.send(.connect(version: version, support: configuration.supportedVersions))]
    }

    /// The WebSocket closed or could not be opened, for the cause the shell names (`nil`: it
    /// knows none); a cause this side named itself (a deadline, an unusable `failed`) comes
    /// first. `unit` is a uniform draw in [0, 1) for jitter.
    public mutating func transportClosed(at now: Instant, unit: Double, failure: UpstreamFailure? = nil) -> [Action] {
        switch phase {
        case .closed, .idle, .waitingToReconnect: return []
        case .connecting, .connected: break
        }
        var actions: [Action] = []
        phase = .waitingToReconnect
        sessionID = nil
        pingSentAt = nil
        reset = nil
        openedAt = nil
        let cause = (closingBecause ?? failure)?.naming(upstream)
        closingBecause = nil
        // The backoff starts over only after a connection that stayed up: one that connects and
        // then fails at once (an oversized document, a crashing publication) keeps backing off.
        if let connectedAt, now - connectedAt >= configuration.healthyAfter { attempt = 0 }
        connectedAt = nil
        if case .messageTooLarge(let limit) = cause?.cause {
            actions += failOversized(limit: limit)
        }
        // Methods lose their place on the wire; at-most-once ones without a result fail now.
        for id in Array(methods.keys) {
            methods[id]!.sentOnThisConnection = false
            let call = methods[id]!
            if call.options.atMostOnce, call.outcome == nil {
                // Meteor's own client fails such a call with this Meteor error (not a cause of ours alone).
                let error = DDPError.meteor(
                    "invocation-failed", "Method invocation might have failed due to dropped connection. Failing because at-most-once was asked.")
                actions += finish(id, outcome: .failure(.server(error)), resultAlreadyReported: false)
            }
        }
        let delay = configuration.reconnect.delay(attempt: attempt, unit: unit)
        attempt += 1
        actions.append(.stateChanged(.reconnecting(attempt: attempt, delay: delay, cause: cause)))
        actions.append(.scheduleReconnect(after: delay))
        return actions
    }

    public mutating func reconnectTimerFired() -> [Action] {
        guard phase == .waitingToReconnect else { return [] }
        phase = .connecting
        return [.stateChanged(.connecting(attempt: attempt)), .openTransport]
    }

    /// The owner closes the connection for good. Pending calls fail.
    public mutating func close(reason: String = "closed") -> [Action] {
        close(reason: reason, failing: .connectionClosed("The connection was closed: \(reason)"))
    }

    /// Closes for good; pending calls, and calls made from now on, fail with `failure`.
    private mutating func close(reason: String, failing failure: DDPClientError) -> [Action] {
        guard phase != .closed else { return [] }
        let wasOpen = phase == .connecting || phase == .connected
        phase = .closed
        closedFailure = failure
        reset = nil
        var actions: [Action] = []
        for id in Array(methods.keys) {
            actions += finish(id, outcome: .failure(.local(failure)), resultAlreadyReported: methods[id]?.outcome != nil)
        }
        blocks = []
        if wasOpen { actions.append(.closeTransport) }
        actions.append(.stateChanged(.closed(reason: reason)))
        return actions
    }

    /// Heartbeat bookkeeping; call periodically (about once a second).
    public mutating func tick(at now: Instant) -> [Action] {
        guard phase == .connected || phase == .connecting, let lastReceived else { return [] }
        if let pingSentAt {
            if now - pingSentAt >= configuration.heartbeatTimeout {
                self.pingSentAt = nil
                closingBecause = UpstreamFailure(.timedOut(.open, after: configuration.heartbeatTimeout))
                return [.closeTransport]
            }
            return []
        }
        // A connect that gets no `connected` in time is a dead link too.
        if phase == .connecting {
            guard let openedAt, now - openedAt >= configuration.connectTimeout else { return [] }
            self.openedAt = nil
            closingBecause = UpstreamFailure(.timedOut(.handshake, after: configuration.connectTimeout))
            return [.closeTransport]
        }
        if let current = reset, now - current.startedAt >= configuration.resyncTimeout {
            return resyncTimedOut()
        }
        guard version != "pre1", now - lastReceived >= configuration.heartbeatInterval else { return [] }
        pingSentAt = now
        return [.send(.ping(id: nil))]
    }

    // MARK: - Incoming messages

    public mutating func received(_ message: ServerMessage, at now: Instant) -> [Action] {
        guard phase == .connecting || phase == .connected else { return [] }
        lastReceived = now
        pingSentAt = nil
        switch message {
        case .connected(let session): return connected(session: session)
        case .failed(let offered): return failed(offered)
        case .ping(let id): return [.send(.pong(id: id))]
        case .pong: return []
        case .added, .changed, .removed, .addedBefore, .movedBefore: return dataMessage(message)
        case .ready(let subs): return ready(subs)
        case .nosub(let id, let error): return nosub(id, error: error.map(DDPFailure.server))
        case .result(let id, let outcome): return result(id, outcome: outcome.mapError(DDPFailure.server))
        case .updated(let ids): return updated(ids)
        case .error(let reason, let offending): return protocolError(reason, offending: offending)
        }
    }

    private mutating func connected(session: String) -> [Action] {
        guard phase == .connecting else { return [] }
        phase = .connected
        sessionID = session
        renegotiated = false
        connectedAt = lastReceived
        openedAt = nil
        var actions: [Action] = [.stateChanged(.connected(session: session, version: version))]
        if everConnected {
            // A new server session: nothing of ours is there. Re-sync and wait for quiescence.
            var revive = Set<String>()
            for (id, sub) in subscriptions where sub.ready { revive.insert(id) }
            reset = Reset(startedAt: lastReceived ?? .now, subsBeingRevived: revive, methodsBlocking: [])
            // Methods that already had their result but not their data: complete at quiescence.
            for (id, call) in methods where call.outcome != nil && !call.dataVisible {
                methods[id]!.dataVisible = true
                actions += deferIfResetting(completeIfDone(id))
            }
            if let loginToken {
                let id = makeMethodID()
                methods[id] = MethodCall(
                    id: id, name: "login", params: [LoginRequest.resume(token: loginToken).parameter],
                    options: MethodOptions(wait: true), kind: .resume)
                blocks.insert(MethodBlock(wait: true, methods: [id]), at: 0)
            }
        }
        everConnected = true
        actions += sendFirstBlock()
        for id in subscriptionOrder {
            guard let sub = subscriptions[id] else { continue }
            actions.append(.send(.sub(id: id, name: sub.name, params: sub.params)))
        }
        actions += checkQuiescence()
        return actions
    }

    /// The server refused our version. One it names that we speak (and did not just offer) is
    /// tried at once; anything else (a version we do not speak, the one we offered, none) is an
    /// upstream fault like any other: the transport closes and the connection backs off and tries
    /// again from our preferred version, saying why. Nothing the server says closes it for good.
    private mutating func failed(_ offered: String) -> [Action] {
        guard phase == .connecting else { return [] }
        if offered != version, configuration.supportedVersions.contains(offered) {
            version = offered
            if !renegotiated {
                // Reconnect at once with the version the server prefers.
                renegotiated = true
                phase = .waitingToReconnect
                return [.closeTransport, .scheduleReconnect(after: .zero)]
            }
            // A server that names another version each time would make that a spin: back off.
            closingBecause = UpstreamFailure(.versionUnstable(offered: offered))
            return [.closeTransport]
        }
        closingBecause = UpstreamFailure(
            offered == version ? .versionRefusedItself(offered) : .versionRefused(offered: offered, ours: configuration.supportedVersions))
        version = configuration.supportedVersions[0]
        return [.closeTransport]
    }

    private mutating func dataMessage(_ message: ServerMessage) -> [Action] {
        if reset != nil {
            _ = reset!.shadow.apply(message)
            return enforceDocumentLimit(message)
        }
        guard let change = cache.apply(message) else { return [] }
        return [.documentsChanged([change])] + enforceDocumentLimit(message)
    }

    /// After an `added`: past ``DDPClientConfiguration/maxCachedDocuments``, stops the
    /// subscriptions still loading (whose data is arriving), or the newest one when all are
    /// ready, with a `too-many-documents` error; the server then removes their documents. Until
    /// the cache is back under the limit nothing more is stopped (documents already on the wire
    /// still arrive), so one burst stops one set of subscriptions, not all of them.
    private mutating func enforceDocumentLimit(_ message: ServerMessage) -> [Action] {
        guard let limit = configuration.maxCachedDocuments else { return [] }
        let adds: Bool
        switch message {
        case .added, .addedBefore: adds = true
        case .removed: adds = false
        default: return []  // changes and moves leave the count as it is
        }
        let count = reset?.shadow.documentCount ?? cache.documentCount
        if count <= limit {
            documentLimitStopPending = false
            return []
        }
        guard adds, !documentLimitStopPending else { return [] }
        documentLimitStopPending = true
        let error = DDPClientError(
            .tooManyDocuments,
            "The session holds more than its limit of \(limit) documents; this subscription was stopped to keep it under the limit",
            details: ["limit": .int(limit)])
        return stopLoading(error, warning: "cache over its limit of \(limit) documents")
    }

    /// Stops the subscriptions still loading (whose data is arriving), or the newest one when
    /// all are ready, with `error`; their `unsub` goes out and the server removes their
    /// documents. For a limit the owner keeps (a memory budget), as the document limit does.
    public mutating func stopLoading(_ error: DDPClientError, warning: String) -> [Action] {
        var victims = subscriptionOrder.filter { subscriptions[$0]?.ready == false }
        if victims.isEmpty, let newest = subscriptionOrder.last { victims = [newest] }
        guard !victims.isEmpty else { return [] }
        var actions = victims.flatMap { stop($0, error: .local(error)) }
        actions.append(.warning("\(warning); stopped subscriptions \(victims)"))
        return deferIfResetting(actions) + checkQuiescence()
    }

    private mutating func ready(_ ids: [String]) -> [Action] {
        var outputs: [Action] = []
        for id in ids {
            guard subscriptions[id] != nil else { continue }
            subscriptions[id]!.ready = true
            reset?.subsBeingRevived.remove(id)
            outputs.append(.subscriptionReady(id: id))
        }
        return deferIfResetting(outputs) + checkQuiescence()
    }

    private mutating func nosub(_ id: String, error: DDPFailure?) -> [Action] {
        reset?.subsBeingRevived.remove(id)
        guard subscriptions.removeValue(forKey: id) != nil else { return checkQuiescence() }
        subscriptionOrder.removeAll { $0 == id }
        return deferIfResetting([.subscriptionStopped(id: id, error: error)]) + checkQuiescence()
    }

    /// A method's `result`. The connection's login is what the upstream says it is: a
    /// login-shaped result (``LoginResult``: `{"id", "token"}`) of any call but `logout` logs
    /// the connection in, whatever route the call took (`login`, `createUser`, or a method
    /// that logs in the way they do); `logout` and a refused resume log it out.
    private mutating func result(_ id: String, outcome: Result<EJSON?, DDPFailure>) -> [Action] {
        guard let call = methods[id], call.outcome == nil else { return [] }
        methods[id]!.outcome = outcome
        var actions: [Action] = []
        switch (call.kind, outcome) {
        case (.logout, .success):
            actions += setLogin(nil)
        case (_, .success(let value)):
            if let login = LoginResult(value) { actions += setLogin(login) }
        case (.resume, .failure(.server(let error))):
            actions.append(.resumeRefused(error))
            actions += setLogin(nil)
            // The owner does not go on without its login: nothing more is sent (not the calls
            // waiting behind the resume), and what waits fails with the cause.
            if configuration.closesWhenLoginIsLost {
                return actions + close(reason: "the login was lost (its resume token was refused)", failing: .loginLost(error))
            }
        default:
            break
        }
        if call.kind != .resume { actions.append(.methodResult(id: id, outcome: outcome)) }
        return actions + deferIfResetting(completeIfDone(id))
    }

    /// The connection's login is now `login`; reported when its user or its token changed.
    private mutating func setLogin(_ login: LoginResult?) -> [Action] {
        let changed = login?.userId != userID || login?.token != loginToken
        userID = login?.userId
        loginToken = login?.token
        tokenExpires = login?.tokenExpires
        return changed ? [.loginChanged(login)] : []
    }

    private mutating func updated(_ ids: [String]) -> [Action] {
        var actions: [Action] = []
        for id in ids {
            reset?.methodsBlocking.remove(id)
            guard methods[id] != nil else { continue }
            methods[id]!.dataVisible = true
            actions += completeIfDone(id)
        }
        return deferIfResetting(actions) + checkQuiescence()
    }

    /// The server refused something we sent. A refused method would otherwise wait forever
    /// (and hold every `wait` call behind it): it fails now with the server's reason.
    private mutating func protocolError(_ reason: String, offending: EJSON?) -> [Action] {
        var actions: [Action] = [.protocolError(reason: reason, offendingMessage: offending)]
        if let offending, offending["msg"]?.stringValue == "method", let id = offending["id"]?.stringValue, methods[id] != nil {
            let error = DDPError.meteor(400, "The upstream refused the call: \(reason)")
            actions += deferIfResetting(finish(id, outcome: .failure(.server(error)), resultAlreadyReported: methods[id]?.outcome != nil))
            reset?.methodsBlocking.remove(id)
            actions += checkQuiescence()
        }
        return actions
    }

    /// After an oversized message: the subscriptions still starting and the calls sent on this
    /// connection still awaiting their result are what may have asked for it; they fail with
    /// the cause instead of being sent again (which would loop).
    private mutating func failOversized(limit: Int) -> [Action] {
        let reason = "The upstream sent a message larger than the \(limit)-byte limit"
        var actions: [Action] = []
        for id in subscriptionOrder where subscriptions[id]?.ready == false {
            subscriptions[id] = nil
            actions.append(
                .subscriptionStopped(id: id, error: .local(DDPClientError(.messageTooLarge, reason + " while this subscription was starting"))))
        }
        subscriptionOrder.removeAll { subscriptions[$0] == nil }
        for (id, call) in methods where call.sentOnThisConnection && call.outcome == nil && call.kind != .resume {
            actions += finish(
                id, outcome: .failure(.local(DDPClientError(.messageTooLarge, reason + " while this call was running"))),
                resultAlreadyReported: false)
        }
        return actions
    }

    /// A resync that does not finish (a subscription that never gets ready again) must not
    /// freeze the view for good: what arrived is swapped in, and the owner is told.
    private mutating func resyncTimedOut() -> [Action] {
        guard let current = reset else { return [] }
        let waiting = current.subsBeingRevived.sorted() + current.methodsBlocking.sorted()
        reset!.subsBeingRevived = []
        reset!.methodsBlocking = []
        return [
            .warning(
                "the resync after a reconnect did not finish within \(configuration.resyncTimeout); still waiting for \(waiting.joined(separator: ", "))"
            )
        ]
            + checkQuiescence()
    }

    // MARK: - Calls from the owner

    /// The owner gave up on a call (it timed out or its caller went away). It leaves the
    /// connection's books, so it blocks nothing behind it and is never sent again; a `result`
    /// arriving later is ignored.
    public mutating func abandonMethod(_ id: String) -> [Action] {
        guard methods[id] != nil else { return [] }
        methods[id] = nil
        reset?.methodsBlocking.remove(id)
        var actions: [Action] = []
        if let index = blocks.firstIndex(where: { $0.methods.contains(id) }) {
            blocks[index].methods.removeAll { $0 == id }
            if blocks[index].methods.isEmpty {
                blocks.remove(at: index)
                if index == 0 { actions += sendFirstBlock() }
            }
        }
        return actions + checkQuiescence()
    }

    /// Starts a method call; returns its id. Sent now if its block is on the wire. `login`,
    /// `createUser` and `logout` are what their own calls below are (a `wait` method, as Meteor's
    /// accounts client calls them; the connection's login follows their results).
    public mutating func callMethod(_ name: String, params: [EJSON], options: MethodOptions = .default) -> (id: String, actions: [Action]) {
        let kind: MethodKind =
            switch name {
            case "login", "createUser": .login
            case "logout": .logout
            default: .normal
            }
        var options = options
        if kind != .normal { options.wait = true }
        return callMethod(name, params: params, options: options, kind: kind)
    }

    mutating func callMethod(_ name: String, params: [EJSON], options: MethodOptions, kind: MethodKind) -> (id: String, actions: [Action]) {
        let id = makeMethodID()
        guard phase != .closed else {
            let failure = closedFailure ?? .connectionClosed("The connection is closed")
            return (id, [.methodResult(id: id, outcome: .failure(.local(failure))), .methodCompleted(id: id, outcome: .failure(.local(failure)))])
        }
        methods[id] = MethodCall(id: id, name: name, params: params, options: options, kind: kind)
        if options.wait || blocks.last?.wait ?? true {
            blocks.append(MethodBlock(wait: options.wait, methods: [id]))
        } else {
            blocks[blocks.count - 1].methods.append(id)
        }
        guard blocks.count == 1, phase == .connected else { return (id, []) }
        methods[id]!.sentOnThisConnection = true
        reset?.methodsBlocking.insert(id)
        return (id, [.send(methods[id]!.message)])
    }

    /// `login` with a password, a resume token or a raw payload; a `wait` method, as Meteor's accounts client calls it.
    public mutating func login(_ request: LoginRequest) -> (id: String, actions: [Action]) {
        callMethod("login", params: [request.parameter], options: MethodOptions(wait: true), kind: .login)
    }

    /// `createUser`; on success the connection is logged in as the new user.
    public mutating func createUser(_ parameter: EJSON) -> (id: String, actions: [Action]) {
        callMethod("createUser", params: [parameter], options: MethodOptions(wait: true), kind: .login)
    }

    public mutating func logout() -> (id: String, actions: [Action]) {
        callMethod("logout", params: [], options: MethodOptions(wait: true), kind: .logout)
    }

    /// Subscribes; `ready` or `nosub` follows. The id (chosen here unless given, and then
    /// unique) is kept across reconnects.
    public mutating func subscribe(_ name: String, params: [EJSON], id chosen: String? = nil) -> (id: String, actions: [Action]) {
        let id: String
        if let chosen, subscriptions[chosen] == nil {
            id = chosen
        } else {
            id = "s\(nextSubID)"
            nextSubID += 1
        }
        guard phase != .closed else {
            return (id, [.subscriptionStopped(id: id, error: .local(closedFailure ?? .connectionClosed("The connection is closed")))])
        }
        subscriptions[id] = Subscription(id: id, name: name, params: params, ready: false)
        subscriptionOrder.append(id)
        return (id, phase == .connected ? [.send(.sub(id: id, name: name, params: params))] : [])
    }

    /// Stops a subscription at once; the server's `removed` messages and `nosub` follow.
    public mutating func unsubscribe(_ id: String) -> [Action] {
        let actions = stop(id, error: nil)
        return actions.isEmpty ? [] : actions + checkQuiescence()
    }

    // MARK: - Internals

    /// Forgets a subscription on the client's side: reports it stopped and sends `unsub`; no
    /// actions when it is unknown.
    private mutating func stop(_ id: String, error: DDPFailure?) -> [Action] {
        guard subscriptions.removeValue(forKey: id) != nil else { return [] }
        subscriptionOrder.removeAll { $0 == id }
        reset?.subsBeingRevived.remove(id)
        var actions: [Action] = [.subscriptionStopped(id: id, error: error)]
        if phase == .connected { actions.append(.send(.unsub(id: id))) }
        return actions
    }

    private mutating func makeMethodID() -> String {
        defer { nextMethodID += 1 }
        return String(nextMethodID)
    }

    private mutating func sendFirstBlock() -> [Action] {
        guard phase == .connected, let first = blocks.first else { return [] }
        var actions: [Action] = []
        for id in first.methods {
            guard let call = methods[id], !call.sentOnThisConnection, call.outcome == nil else { continue }
            methods[id]!.sentOnThisConnection = true
            reset?.methodsBlocking.insert(id)
            actions.append(.send(call.message))
        }
        return actions
    }

    /// Completes a method when both its result and its data have arrived, and moves the blocks on.
    private mutating func completeIfDone(_ id: String) -> [Action] {
        guard let call = methods[id], let outcome = call.outcome, call.dataVisible else { return [] }
        return finish(id, outcome: outcome, resultAlreadyReported: true)
    }

    private mutating func finish(_ id: String, outcome: Result<EJSON?, DDPFailure>, resultAlreadyReported: Bool) -> [Action] {
        guard let call = methods.removeValue(forKey: id) else { return [] }
        var actions: [Action] = []
        if call.kind != .resume {
            if !resultAlreadyReported { actions.append(.methodResult(id: id, outcome: outcome)) }
            actions.append(.methodCompleted(id: id, outcome: outcome))
        }
        guard let index = blocks.firstIndex(where: { $0.methods.contains(id) }) else { return actions }
        blocks[index].methods.removeAll { $0 == id }
        if blocks[index].methods.isEmpty {
            blocks.remove(at: index)
            if index == 0 { actions += sendFirstBlock() }
        }
        return actions
    }

    /// While waiting for quiescence, what consumers would see waits too; what goes on the wire does not.
    private mutating func deferIfResetting(_ actions: [Action]) -> [Action] {
        guard reset != nil else { return actions }
        var immediate: [Action] = []
        for action in actions {
            if case .send = action { immediate.append(action) } else { reset!.deferred.append(action) }
        }
        return immediate
    }

    /// Once every revived subscription is ready again and every method sent since the
    /// reconnect has its data, swaps in the new document set and reports only the net difference.
    private mutating func checkQuiescence() -> [Action] {
        guard let current = reset, current.subsBeingRevived.isEmpty, current.methodsBlocking.isEmpty else { return [] }
        reset = nil
        let changes = DocumentCache.difference(from: cache, to: current.shadow)
        cache = current.shadow
        return (changes.isEmpty ? [] : [.documentsChanged(changes)]) + current.deferred
    }
}
