import BridgeStore
import DDP
import DDPClient
import Foundation
import Timing

/// A session as its store keeps it, and a session brought back from one.
extension Session {
    /// What the store should hold now, with the next version, and the plain login token (sealed by
    /// the caller, outside the lock). `onlyIfChanged`: `nil` unless something changed since the last
    /// save, or the idle deadline moved by more than `slack`.
    func storeRecord(onlyIfChanged: Bool = false, slack: Duration = .zero) -> (record: StoredSession, loginToken: String?)? {
        let now = runtime.clock.now
        let wallClock = runtime.clock.wallClock
        let idle = settings.idleTimeout
        guard let user,
            let next = state.withLock({
                $0.machine.storeRecord(onlyIfChanged: onlyIfChanged, slack: slack, now: now, wallClock: wallClock, idleTimeout: idle)
            })
        else { return nil }
        let record = StoredSession(
            tokenHash: user.tokenHash, version: next.version, clientAddress: user.address, userID: next.userID, sealedLogin: nil,
            bridgeLogin: next.bridgeLogin, subscriptions: next.subscriptions, expiresAt: next.expiresAt, ended: nil,
            createdAt: StoredSession.milliseconds(createdAt))
        return (record, next.loginToken)
    }

    /// `true` when the store was last asked about this session `interval` ago or more (and
    /// marks it asked now): one caller checks, the others go on.
    func claimStoreCheck(every interval: Duration) -> Bool {
        let now = runtime.clock.now
        return state.withLock { $0.machine.claimStoreCheck(every: interval, now: now) }
    }

    /// `true`: the caller writes the session (none is being written); `false`, after a write that
    /// began once the caller asked: it was saved for it.
    func leadSave() async -> Bool {
        await withCheckedContinuation { continuation in
            let leads = state.withLock { state -> Bool in
                guard state.machine.leadSave() else {
                    state.saveWaiters.append(continuation)
                    return false
                }
                return true
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
            state.machine.saveEnded(othersWaiting: !waiting.isEmpty)
            return waiting
        }
    }

    /// Marks the session changed, so the registry's sweep saves it (a failed save is tried again).
    func markDirty() { state.withLock { $0.machine.markDirty() } }

    /// Takes on what a stored session held before its upstream login and subscriptions are redone.
    func adopt(_ stored: StoredSession) {
        state.withLock { $0.machine.adopt(version: stored.version, expiresAt: stored.expiresAt, bridgeLogin: stored.bridgeLogin) }
    }

    /// Subscribes again, under their own ids and with their reference counts, to what a stored
    /// session held; waits for each to be ready (up to `timeout` in all). A subscription the
    /// upstream refuses now is dropped, as it would be on a live session.
    func resubscribe(_ subscriptions: [StoredSubscription], timeout: Duration) async {
        let restored = state.withLock { state in
            subscriptions.filter { state.machine.restoreSubscription($0) }
        }
        await withTaskGroup(of: Void.self) { group in
            for subscription in restored {
                group.addTask {
                    do {
                        try await self.client.subscribe(subscription.name, params: subscription.params, id: subscription.id, waitUntilReady: false)
                        // Not ready in time: it stays, pending, as a slow subscription would on a live session.
                        try? await self.client.waitUntilReady(subscription.id, timeout: timeout)
                    } catch {
                        self.state.withLock { $0.machine.subscriptionFailed(subscription.id) }
                    }
                }
            }
        }
    }
}
