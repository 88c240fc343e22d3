import BridgeStore
import DDP
import DDPClient
import Foundation
import HTTPTypes

/// A session's books as a value, in the shape of ``DDP/DDPConnectionStateMachine``: what its
/// upstream connection reported (state, user, failure), its subscription ledger, its event
/// pipeline, its activity and open streams, its login, its store bookkeeping and its memory
/// charge. It does no I/O and reads no clock: every input carries its instant, and what must
/// happen outside (events to the streams, waiters to resume, a timer to arm) comes back as
/// ``Action``s, which ``Session`` (the shell) performs under its lock, in order.
///
/// Tested as transcripts, without sockets (SessionStateMachineTests).
struct SessionStateMachine: Sendable {
    enum Action: Sendable {
        /// Hand these events, in order, to every open stream.
        case deliver([SessionEvent])
        /// Resume the requests waiting for the upstream: `nil`, it is connected; else fail them with the error.
        case resumeConnectionWaiters(BridgeError?)
        /// Arm the batch window's timer (none is armed): call ``flushTimerFired(now:)`` at this instant.
        case armFlushTimer(at: ContinuousClock.Instant)
        /// End every open stream with this last frame.
        case finishStreams(ending: [UInt8])
    }

    /// How a request that needs the upstream goes on (``connectionWait``).
    enum ConnectionWait: Sendable {
        case ready
        case refused(BridgeError)
        case wait
    }

    /// What the shell does when the session closes (``close(reason:keepLogin:)``).
    struct Closing: Sendable {
        /// The last frame every open stream gets.
        let ending: [UInt8]
        /// Log out upstream first (the bridge logged in with a password, and the login is not kept).
        let logOut: Bool
        /// The charge to give back to the memory budget, and whether it was an anonymous one.
        let charged: Int
        let anonymous: Bool
    }

    /// What a session's store row holds, at its next version (``storeRecord(onlyIfChanged:slack:now:wallClock:idleTimeout:)``).
    struct StoreRecord: Sendable {
        let version: Int64
        let expiresAt: Int64
        let userID: String?
        let bridgeLogin: Bool
        let subscriptions: [StoredSubscription]
        let loginToken: String?
    }

    // MARK: - The books

    private(set) var connection: ConnectionState = .idle
    /// Why the upstream is not usable (``DDP/ConnectionState/failure(previously:)``).
    private(set) var upstreamFailure: UpstreamFailure?
    /// Who the session is, and the Meteor resume token of that login (kept, sealed, by a
    /// session store): what the upstream connection last said (``DDPClient/DDPClientEvent/loginChanged(_:)``),
    /// whichever route the login took (a session route, `POST /v1/methods/login`, a resume).
    private(set) var userID: String?
    private(set) var loginToken: String?
    /// The bridge itself logged in with a password (so closing the session logs out upstream):
    /// claimed for the current token by whoever made the login (``claimLogin(token:byBridge:)``).
    private(set) var loggedInByBridge = false
    /// The session had a login and lost it (its resume token was refused after a reconnect):
    /// what every request gets from now on (401 `login-lost`); the registry ends the session.
    private(set) var loginLost: BridgeError?
    private(set) var closed: String?
    /// The subscription ledger (shared by name and params, counted, lingering).
    var subscriptions = SharedSubscriptions()
    private(set) var pipeline: EventPipeline
    /// Recently answered single-document bodies, dropped as their documents change.
    var encodedDocuments = EncodedDocuments()
    private(set) var lastActivity: ContinuousClock.Instant
    /// Streams admitted and not yet detached.
    private(set) var openStreams = 0
    private var flushArmed = false

    /// Saves of this session to its store so far (a store keeps only the newest).
    private(set) var version: Int64 = 0
    /// The idle deadline last saved (ms since 1970), and whether anything else changed since.
    private(set) var savedDeadline: Int64 = 0
    private(set) var dirty = false
    private var storeCheckedAt: ContinuousClock.Instant?
    /// A write of this session to its store is under way.
    private var saveInFlight = false

    /// The cache's and log's bytes as last charged to the memory budget, and whether a stop for
    /// the budget is under way (nothing more is stopped until the charge is back within).
    private var chargedBytes = 0
    /// The cache's bytes at the last charge: documents still held (a stopped subscription's are
    /// removed by the server after its `unsub`, and may still be arriving meanwhile).
    private(set) var cachedBytes = 0
    private var budgetStopPending = false

    init(pipeline: EventPipeline, now: ContinuousClock.Instant) {
        self.pipeline = pipeline
        self.lastActivity = now
    }

    // MARK: - What the upstream connection reports

    /// An event of the session's ``DDPClient``: state, stream events, and the batch timer.
    mutating func received(_ event: DDPClientEvent, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        var events: [SessionEvent] = []
        switch event {
        case .stateChanged(let state):
            connection = state
            upstreamFailure = state.failure(previously: upstreamFailure)
            events = pipeline.event(.connection, state.ejson, now: now)
            switch state {
            case .connected:
                actions.append(.resumeConnectionWaiters(nil))
            case .closed(let reason):
                actions.append(.resumeConnectionWaiters(loginLost ?? .upstreamUnavailable("The upstream connection is closed: \(reason)")))
            default:
                break
            }
        case .subscriptionReady(let id):
            subscriptions.markReady(id)
            events = pipeline.event(.ready, ["subscriptions": [.string(id)]], now: now)
        case .subscriptionStopped(let id, let error):
            subscriptions.remove(id)
            events = pipeline.event(.nosub, ["subscription": .string(id), "error": error?.ejson ?? .null], now: now)
        case .loginChanged(let login):
            let user = login?.userId
            // A new token is nobody's to log out until its maker claims it.
            if login?.token != loginToken { loggedInByBridge = false }
            loginToken = login?.token
            dirty = true
            if user != userID {
                userID = user
                events = pipeline.event(.user, ["userId": user.map(EJSON.string) ?? .null], now: now)
            }
        case .documentsChanged(let changes):
            encodedDocuments.changed(changes)
            events = pipeline.documents(changes, now: now)
        case .resumeRefused(let refusal):
            // The upstream no longer takes the login. The session never goes on without it (its
            // connection closed: nothing more was sent upstream): its streams end now, its
            // requests get 401 `login-lost`, and the registry ends it.
            loginToken = nil
            loggedInByBridge = false
            if loginLost == nil {
                loginLost = BridgeError.from(DDPClientError.loginLost(refusal))
                if let ending = lostLoginEnding { actions.append(.finishStreams(ending: ending)) }
            }
        case .protocolError:
            break
        }
        // Waiters first, then the streams: as the shell did before it was a machine.
        if !events.isEmpty { actions.append(.deliver(events)) }
        return actions + armFlushTimer()
    }

    /// The batch window's timer fired: what is due goes out, and the next window is armed.
    mutating func flushTimerFired(now: ContinuousClock.Instant) -> [Action] {
        flushArmed = false
        let events = pipeline.flushIfDue(now: now)
        return (events.isEmpty ? [] : [.deliver(events)]) + armFlushTimer()
    }

    /// Everything held in the batch goes out now (a stream attaches, a position is read).
    mutating func flush(now: ContinuousClock.Instant) -> [Action] {
        let events = pipeline.flush(now: now)
        return events.isEmpty ? [] : [.deliver(events)]
    }

    private mutating func armFlushTimer() -> [Action] {
        guard !flushArmed, let deadline = pipeline.deadline else { return [] }
        flushArmed = true
        return [.armFlushTimer(at: deadline)]
    }

    // MARK: - Requests that need the upstream

    var connectionWait: ConnectionWait {
        if let loginLost { return .refused(loginLost) }
        return switch connection {
        case .connected: .ready
        case .closed(let reason): .refused(.upstreamUnavailable("The upstream connection is closed: \(reason)"))
        default: .wait
        }
    }

    /// 503 with the time until the next attempt as `Retry-After` (a wait for the upstream ran
    /// out), naming the cause: this session's last failed attempt, else `elsewhere` (the
    /// process's latest, ``DDPClient/UpstreamFailureLog``), for a first attempt still under way
    /// when the wait ran out (an upgrade that is never answered outlasts `--connect-timeout`).
    func unreachable(elsewhere: UpstreamFailure? = nil) -> BridgeError {
        var retry = 5
        // Fractional milliseconds (a Double), rounded up to seconds there: `wholeMilliseconds` would truncate first.
        if case .reconnecting(_, let delay, _) = connection { retry = BridgeError.retryAfterSeconds(milliseconds: delay.seconds * 1000) }
        let failure = upstreamFailure ?? elsewhere
        let reason = "The upstream Meteor server is unreachable" + (failure.map { ": \($0.message)" } ?? "")
        return BridgeError(
            .upstreamUnavailable, reason, details: UpstreamFailure.details(connection, failure), retryAfter: retry)
    }

    // MARK: - Activity and streams

    mutating func touch(now: ContinuousClock.Instant) { lastActivity = now }

    func isIdle(now: ContinuousClock.Instant, timeout: Duration) -> Bool { openStreams == 0 && now - lastActivity >= timeout }

    /// Admits one more stream (a closed session, or one at its limit, refuses it).
    mutating func admitStream(limit: Int) throws(BridgeError) {
        if let closed { throw BridgeError(.sessionExpired, "This session has ended: \(closed)") }
        if let loginLost { throw loginLost }
        guard openStreams < limit else {
            throw BridgeError(.tooManyStreams, "A session may have at most \(limit) open streams")
        }
        openStreams += 1
    }

    /// A stream ended: the session is active from now, as a request would make it.
    mutating func streamDetached(now: ContinuousClock.Instant) {
        openStreams -= 1
        lastActivity = now
    }

    // MARK: - Login

    /// A login upstream succeeded, made by the claimant: `byBridge`, with credentials here (the
    /// bridge's to log out when the session closes). Who is logged in, and with which token,
    /// the connection has said already (``received(_:now:)``); a token it no longer holds (a
    /// later login came first) is not claimed.
    mutating func claimLogin(token: String, byBridge: Bool) {
        guard token == loginToken else { return }
        loggedInByBridge = byBridge
    }

    /// The last frame every stream gets once the login is lost, open or attaching (`nil`: it is not).
    var lostLoginEnding: [UInt8]? {
        loginLost.map { SSEFrame.lastError("login-lost", $0.reason) }
    }

    // MARK: - Memory budget

    /// The change in what the session holds (its cache's bytes and its log's), now charged:
    /// the delta to charge, and whether the session is anonymous. A closed session gave its
    /// charge back; what still arrives is not its to hold.
    mutating func charge(cachedBytes: Int) -> (delta: Int, anonymous: Bool) {
        guard closed == nil else { return (0, false) }
        self.cachedBytes = cachedBytes
        let bytes = cachedBytes + pipeline.log.bytes
        defer { chargedBytes = bytes }
        return (bytes - chargedBytes, userID == nil)
    }

    /// After a charge: whether to stop the loading subscriptions now (once, until back within).
    mutating func budgetStop(within: Bool, delta: Int) -> Bool {
        guard !within else {
            budgetStopPending = false
            return false
        }
        guard delta > 0, !budgetStopPending else { return false }
        budgetStopPending = true
        return true
    }

    // MARK: - Closing

    /// Closes the books (`nil` when closed already): the streams' last frame, whether to log out
    /// upstream, and the charge to give back.
    mutating func close(reason: String, keepLogin: Bool) -> Closing? {
        guard closed == nil else { return nil }
        closed = reason
        defer { chargedBytes = 0 }
        let ending = SSEFrame.lastError("session-ended", "The session has ended: \(reason)")
        return Closing(ending: ending, logOut: loggedInByBridge && !keepLogin, charged: chargedBytes, anonymous: userID == nil)
    }

    // MARK: - Store bookkeeping

    /// What the store should hold now, at the next version; `onlyIfChanged`: `nil` unless
    /// something changed since the last save or the idle deadline moved by more than `slack`.
    /// `wallClock` turns the idle deadline into ms since 1970 (an open stream counts as activity).
    mutating func storeRecord(
        onlyIfChanged: Bool, slack: Duration, now: ContinuousClock.Instant, wallClock: Date, idleTimeout: Duration
    ) -> StoreRecord? {
        // A session that lost its login is never stored as an anonymous one: it ends.
        guard closed == nil, loginLost == nil else { return nil }
        let since = openStreams == 0 ? now - lastActivity : .zero
        let remaining = max(idleTimeout - since, .zero)
        let deadline = StoredSession.milliseconds(wallClock.addingTimeInterval(remaining.seconds))
        if onlyIfChanged, !dirty, deadline - savedDeadline <= slack.wholeMilliseconds { return nil }
        version += 1
        savedDeadline = deadline
        dirty = false
        return StoreRecord(
            version: version, expiresAt: deadline, userID: userID, bridgeLogin: loggedInByBridge, subscriptions: subscriptions.durable,
            loginToken: loginToken)
    }

    /// `true` when the store was last asked about this session `interval` ago or more (and
    /// marks it asked now): one caller checks, the others go on.
    mutating func claimStoreCheck(every interval: Duration, now: ContinuousClock.Instant) -> Bool {
        if let last = storeCheckedAt, now - last < interval { return false }
        storeCheckedAt = now
        return true
    }

    /// `true`: the caller writes the session (none is being written); `false`: it waits for
    /// the next write.
    mutating func leadSave() -> Bool {
        guard saveInFlight else {
            saveInFlight = true
            return true
        }
        return false
    }

    /// A write ended; `othersWaiting`: callers asked meanwhile, and the next write is theirs.
    mutating func saveEnded(othersWaiting: Bool) {
        if !othersWaiting { saveInFlight = false }
    }

    /// Something the store keeps changed: the registry's sweep saves it (a failed save is tried again).
    mutating func markDirty() { dirty = true }

    /// Takes on what a stored session held (before its login and subscriptions are redone).
    mutating func adopt(version: Int64, expiresAt: Int64, bridgeLogin: Bool) {
        self.version = version
        savedDeadline = expiresAt
        loggedInByBridge = bridgeLogin
    }
}
