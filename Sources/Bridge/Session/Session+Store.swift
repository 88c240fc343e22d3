import DDP
import DDPClient
import Foundation

/// A session as its store keeps it, and a session brought back from one.
extension Session {
    /// The idle deadline now, in ms since 1970: an open stream counts as activity.
    private static func deadline(_ state: State, idle: Duration, now: ContinuousClock.Instant) -> Int64 {
        let since = state.streams.isEmpty ? now - state.lastActivity : .zero
        let remaining = max(idle - since, .zero)
        return StoredSession.milliseconds(Date().addingTimeInterval(remaining.seconds))
    }

    /// What the store should hold now, with the next version, and the plain login token (sealed by
    /// the caller, outside the lock). `onlyIfChanged`: `nil` unless something changed since the last
    /// save, or the idle deadline moved by more than `slack`.
    func storeRecord(onlyIfChanged: Bool = false, slack: Duration = .zero) -> (record: StoredSession, loginToken: String?)? {
        let now = ContinuousClock.now
        return state.withLock { state -> (StoredSession, String?)? in
            guard state.closed == nil else { return nil }
            let deadline = Self.deadline(state, idle: configuration.sessionIdleTimeout, now: now)
            let slackMilliseconds = slack.wholeMilliseconds
            if onlyIfChanged, !state.dirty, deadline - state.savedDeadline <= slackMilliseconds { return nil }
            state.version += 1
            state.savedDeadline = deadline
            state.dirty = false
            let record = StoredSession(
                tokenHash: tokenHash, version: state.version, clientAddress: clientAddress, userID: state.userID, sealedLogin: nil,
                bridgeLogin: state.loggedInByBridge, subscriptions: state.subscriptions.durable, expiresAt: deadline, ended: nil,
                createdAt: StoredSession.milliseconds(createdAt))
            return (record, state.loginToken)
        }
    }

    /// `true` when the store was last asked about this session `interval` ago or more (and
    /// marks it asked now): one caller checks, the others go on.
    func claimStoreCheck(every interval: Duration) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { state in
            if let last = state.storeCheckedAt, now - last < interval { return false }
            state.storeCheckedAt = now
            return true
        }
    }

    /// `true`: the caller writes the session (none is being written); `false`, after a write that
    /// began once the caller asked: it was saved for it.
    func leadSave() async -> Bool {
        await withCheckedContinuation { continuation in
            let leads = state.withLock { state -> Bool in
                guard state.saveInFlight else {
                    state.saveInFlight = true
                    return true
                }
                state.saveWaiters.append(continuation)
                return false
            }
            if leads { continuation.resume(returning: true) }
        }
    }

    /// After a write: the callers who asked meanwhile (the next write is theirs), or none, and
    /// the session is no longer being written.
    func nextSaveBatch() -> [CheckedContinuation<Bool, Never>] {
        state.withLock { state in
            let waiting = state.saveWaiters
            state.saveWaiters = []
            if waiting.isEmpty { state.saveInFlight = false }
            return waiting
        }
    }

    /// Marks the session changed, so the registry's sweep saves it (a failed save is tried again).
    func markDirty() { state.withLock { $0.dirty = true } }

    /// Takes on what a stored session held before its upstream login and subscriptions are redone.
    func adopt(_ stored: StoredSession) {
        state.withLock { state in
            state.version = stored.version
            state.savedDeadline = stored.expiresAt
            state.loggedInByBridge = stored.bridgeLogin
        }
    }

    /// Subscribes again, under their own ids and with their reference counts, to what a stored
    /// session held; waits for each to be ready (up to `timeout` in all). A subscription the
    /// upstream refuses now is dropped, as it would be on a live session.
    func resubscribe(_ subscriptions: [StoredSubscription], timeout: Duration) async {
        let restored = state.withLock { state in
            subscriptions.filter { state.subscriptions.restore(id: $0.id, name: $0.name, params: $0.params, refs: $0.refs) }
        }
        await withTaskGroup(of: Void.self) { group in
            for subscription in restored {
                group.addTask {
                    do {
                        try await self.client.subscribe(subscription.name, params: subscription.params, id: subscription.id, waitUntilReady: false)
                        // Not ready in time: it stays, pending, as a slow subscription would on a live session.
                        try? await self.client.waitUntilReady(subscription.id, timeout: timeout)
                    } catch {
                        self.state.withLock { $0.subscriptions.remove(subscription.id) }
                    }
                }
            }
        }
    }
}
