import DDP
import DDPClient
import Foundation
import HTTPTypes
import Testing

@testable import Bridge

/// The session's books as transcripts: events in, with their instants; actions out. No
/// sockets, no clock, no lock (``SessionStateMachine``).
@Suite struct SessionStateMachineTests {
    typealias Action = SessionStateMachine.Action

    let t0 = ContinuousClock.now

    func machine(window: Duration = .milliseconds(10)) -> SessionStateMachine {
        SessionStateMachine(pipeline: EventPipeline(window: window, logCapacity: 100), now: t0)
    }

    /// What an action list says, in a form a test can compare.
    func describe(_ actions: [Action]) -> [String] {
        actions.map { action in
            switch action {
            case .deliver(let events): "deliver " + events.map { "\($0.id):\($0.kind.rawValue)" }.joined(separator: ",")
            case .resumeConnectionWaiters(nil, _): "resume waiters"
            case .resumeConnectionWaiters(let error?, nil): "fail waiters \(error.error.stringValue ?? "?")"
            case .resumeConnectionWaiters(let error?, let before?): "fail waiters before attempt \(before) \(error.error.stringValue ?? "?")"
            case .armFlushTimer(let at): "arm timer +\((at - t0).wholeMilliseconds)ms"
            case .finishStreams(let ending): "finish streams " + (Self.lastErrorCode(ending) ?? "?")
            }
        }
    }

    /// The `error` of a stream's last frame (`event: error`, `data: {"error", "reason"}`).
    static func lastErrorCode(_ frame: [UInt8]) -> String? {
        let text = String(decoding: frame, as: UTF8.self)
        guard text.hasPrefix("event: error\n"), let data = text.split(separator: "\n").first(where: { $0.hasPrefix("data: ") }) else { return nil }
        return (try? EJSONParser.parse(String(data.dropFirst(6))))?["error"]?.stringValue
    }

    @Test func theConnectionComingUpReleasesItsWaitersAndTellsTheStreams() {
        var m = machine()
        #expect(describe(m.received(.stateChanged(.connecting(attempt: 1)), now: t0)) == ["deliver 1:connection"])
        guard case .wait = m.connectionWait else {
            Issue.record("a request waits while the connection comes up")
            return
        }
        #expect(
            describe(m.received(.stateChanged(.connected(session: "s", version: "1")), now: t0))
                == ["resume waiters", "deliver 2:connection"])
        guard case .ready = m.connectionWait else {
            Issue.record("a request goes on once connected")
            return
        }
        let closing = m.received(.stateChanged(.closed(reason: "gone")), now: t0)
        #expect(describe(closing) == ["fail waiters upstream-unavailable", "deliver 3:connection"])
        guard case .refused(let refusal) = m.connectionWait else {
            Issue.record("a closed connection refuses at once")
            return
        }
        #expect(refusal.reason.contains("gone"))
    }

    @Test func whyTheUpstreamIsUnreachableIsKeptThroughTheNextAttempt() {
        var m = machine()
        let offered99 = UpstreamFailure(.versionRefused(offered: "99", ours: ["1"]))
        _ = m.received(.stateChanged(.reconnecting(attempt: 2, delay: .milliseconds(2_500), cause: offered99)), now: t0)
        _ = m.received(.stateChanged(.connecting(attempt: 2)), now: t0)
        let answer = m.unreachable()
        #expect(answer.status == .serviceUnavailable && answer.retryAfter == 5)
        #expect(answer.reason.hasSuffix("(it offered '99'; the bridge speaks 1)"), "\(answer.reason)")
        #expect(answer.details?["cause"]?["code"] == "ddp-version-refused", "the cause is kept in details too")
        _ = m.received(.stateChanged(.reconnecting(attempt: 3, delay: .milliseconds(2_500), cause: nil)), now: t0)
        #expect(m.unreachable().retryAfter == 3, "Retry-After is the time to the next attempt")
        _ = m.received(.stateChanged(.connected(session: "s", version: "1")), now: t0)
        #expect(m.upstreamFailure == nil)
    }

    /// A wait that runs out during the session's first attempt names the process's latest cause;
    /// the session's own, once it has one, comes first.
    @Test func aFirstAttemptStillUnderWayTakesTheCauseFromElsewhere() {
        var m = machine()
        let silent = UpstreamFailure(.timedOut(.upgrade, after: .seconds(15)), url: "ws://app:3000")
        _ = m.received(.stateChanged(.connecting(attempt: 0)), now: t0)
        #expect(m.unreachable().details?["cause"] == nil, "nobody knows yet")
        let answer = m.unreachable(elsewhere: silent)
        #expect(answer.reason == "The upstream Meteor server is unreachable: the WebSocket upgrade request for / got no answer within 15 s")
        #expect(answer.details?["cause"]?["hint"]?.stringValue?.hasSuffix("ws://app:3000/websocket") == true)
        let refused = UpstreamFailure(.connectionRefused(endpoint: "app:3000"))
        _ = m.received(.stateChanged(.reconnecting(attempt: 1, delay: .seconds(1), cause: refused)), now: t0)
        #expect(m.unreachable(elsewhere: silent).details?["cause"]?["code"] == "connection-refused")
    }

    /// Requests waiting for the upstream fail at once only when the cause is definite; an
    /// attempt that timed out or lost its connection leaves them waiting for the next one (in
    /// the full parallel test run, a handshake past a 1 s connect timeout failed a request the
    /// next attempt would have answered).
    @Test func onlyADefiniteCauseFailsTheWaitersAtOnce() {
        let causes: [(UpstreamFailure, Bool)] = [
            (UpstreamFailure(.connectionRefused(endpoint: "app:3000")), true),
            (UpstreamFailure(.versionRefused(offered: "99", ours: ["1"])), true),
            (UpstreamFailure(.upgradeRefused(status: 404, contentType: nil)), true),
            (UpstreamFailure(.timedOut(.handshake, after: .seconds(1))), false),
            (UpstreamFailure(.closed(.open)), false),
            (UpstreamFailure(.protocolViolation("a frame with a reserved bit")), false)
        ]
        for (cause, failsAtOnce) in causes {
            var m = machine()
            _ = m.received(.stateChanged(.connecting(attempt: 0)), now: t0)
            let actions = describe(m.received(.stateChanged(.reconnecting(attempt: 1, delay: .seconds(1), cause: cause)), now: t0))
            #expect(actions.contains("fail waiters before attempt 1 upstream-unavailable") == failsAtOnce, "\(cause.code): \(actions)")
            #expect(cause.isDefinite == failsAtOnce)
        }
    }

    /// A definite failure fails only the requests that waited before its attempt began: one that
    /// came while it was under way waits for the next attempt, which it asks for (in the full
    /// parallel test run, an attempt refused just before the upstream came back failed a request
    /// made after the upstream was back).
    @Test func aDefiniteFailureFailsOnlyWhoWaitedBeforeItsAttemptBegan() {
        var m = machine()
        let refused = UpstreamFailure(.connectionRefused(endpoint: "app:3000"))
        #expect(m.attemptsBegun == 0)
        _ = m.received(.stateChanged(.connecting(attempt: 0)), now: t0)
        #expect(m.attemptsBegun == 1)
        let first = describe(m.received(.stateChanged(.reconnecting(attempt: 1, delay: .seconds(1), cause: refused)), now: t0))
        #expect(first.contains("fail waiters before attempt 1 upstream-unavailable"), "\(first)")
        _ = m.received(.stateChanged(.connecting(attempt: 1)), now: t0)
        #expect(m.attemptsBegun == 2)
        let second = describe(m.received(.stateChanged(.reconnecting(attempt: 2, delay: .seconds(1), cause: refused)), now: t0))
        #expect(second.contains("fail waiters before attempt 2 upstream-unavailable"), "\(second)")
        let up = describe(m.received(.stateChanged(.connected(session: "s", version: "1")), now: t0))
        #expect(up.contains("resume waiters"), "\(up)")
    }

    @Test func aBurstOfChangesArmsOneTimerAndGoesOutWhenItFires() {
        var m = machine(window: .milliseconds(10))
        var cache = DocumentCache()
        let first = cache.apply(.added(collection: "c", id: "a", fields: ["n": 0]))!
        #expect(describe(m.received(.documentsChanged([first]), now: t0)) == ["deliver 1:added"], "light traffic goes out at once")
        for n in 1...3 {
            let change = cache.apply(.changed(collection: "c", id: "a", fields: ["n": .int(n)], cleared: []))!
            let actions = m.received(.documentsChanged([change]), now: t0 + .milliseconds(n))
            #expect(describe(actions) == (n == 1 ? ["arm timer +10ms"] : []), "one timer for the window, n = \(n)")
        }
        #expect(describe(m.flushTimerFired(now: t0 + .milliseconds(10))) == ["deliver 2:changed"], "consolidated")
        #expect(describe(m.flushTimerFired(now: t0 + .milliseconds(20))) == [], "nothing held, nothing armed")
        // A later burst arms a timer again.
        let late = cache.apply(.changed(collection: "c", id: "a", fields: ["n": 9], cleared: []))!
        _ = m.received(.documentsChanged([late]), now: t0 + .milliseconds(21))
        #expect(describe(m.received(.documentsChanged([late]), now: t0 + .milliseconds(22))) == ["arm timer +31ms"])
        #expect(describe(m.flush(now: t0 + .milliseconds(23))) == ["deliver 4:changed"], "a stream attaching takes it all now")
    }

    /// The phase follows the connection until the login is lost or the session closes; those
    /// stay, whatever the connection says after.
    @Test func thePhaseFollowsTheConnectionUntilALostLoginOrTheEnd() {
        func phase(_ m: SessionStateMachine) -> String {
            switch m.phase {
            case .connecting: "connecting"
            case .connected: "connected"
            case .upstreamClosed(let reason): "upstream closed: \(reason)"
            case .loginLost(let error): "login lost: \(error.error.stringValue ?? "?")"
            case .closed(let reason): "closed: \(reason)"
            }
        }
        var m = machine()
        #expect(phase(m) == "connecting")
        _ = m.received(.stateChanged(.connected(session: "s", version: "1")), now: t0)
        #expect(phase(m) == "connected")
        _ = m.received(.stateChanged(.reconnecting(attempt: 1, delay: .seconds(1), cause: nil)), now: t0)
        #expect(phase(m) == "connecting")
        let refused = m.received(.resumeRefused(DDPError.meteor(403, "You've been logged out by the server")), now: t0)
        #expect(phase(m) == "login lost: login-lost")
        #expect(describe(refused).contains("finish streams login-lost"))
        _ = m.received(.stateChanged(.connected(session: "s2", version: "1")), now: t0)
        #expect(phase(m) == "login lost: login-lost", "a lost login stays lost")
        guard case .refused(let error) = m.connectionWait else {
            Issue.record("a request waits on a session whose login is lost")
            return
        }
        #expect(error.error == "login-lost")
        #expect(m.close(reason: "login lost", keepLogin: false) != nil)
        #expect(phase(m) == "closed: login lost")
        #expect(m.close(reason: "again", keepLogin: false) == nil, "closing is once")
        _ = m.received(.stateChanged(.closed(reason: "client closed")), now: t0)
        #expect(phase(m) == "closed: login lost", "closed is final")

        var other = machine()
        _ = other.received(.stateChanged(.closed(reason: "client closed")), now: t0)
        #expect(phase(other) == "upstream closed: client closed")
    }

    @Test func subscriptionsFollowTheUpstreamAndALocalStopReadsAsItsCode() {
        var m = machine()
        let refusal: (Int) -> BridgeError = { _ in BridgeError.badRequest("over the limit") }
        _ = try? m.acquireSubscription("tasks", [], limit: 10, transient: false, makeID: { "b1" }, refusal: refusal)
        _ = try? m.acquireSubscription("lists", [], limit: 10, transient: false, makeID: { "b2" }, refusal: refusal)
        #expect(describe(m.received(.subscriptionReady(id: "b1"), now: t0)) == ["deliver 1:ready"])
        #expect(m.subscription("b1")?.state == .ready)
        let stop = DDPFailure.local(DDPClientError(.memoryBudgetExhausted, "The bridge holds its memory budget"))
        let actions = m.received(.subscriptionStopped(id: "b2", error: stop), now: t0)
        guard case .deliver(let events) = actions.first else {
            Issue.record("a nosub event")
            return
        }
        #expect(events.first?.payload["error"]?["error"] == "memory-budget-exhausted")
        #expect(events.first?.payload["subscription"] == "b2")
        #expect(m.subscriptionCount == 1, "the stopped one is gone from the ledger")
    }

    /// Who the session is comes from its connection alone (`loginChanged`, whatever call made
    /// the login): the user, the `user` event, the store's record, the budget's standing. A
    /// claim makes a login the bridge's to log out only while it is the session's login.
    @Test func theConnectionSaysWhoTheSessionIs() {
        var m = machine(window: .zero)
        _ = m.received(.stateChanged(.connected(session: "s", version: "1")), now: t0)
        let r1 = m.storeRecord(onlyIfChanged: true, slack: .seconds(60), now: t0, wallClock: Date(), idleTimeout: .seconds(600))
        #expect(r1 != nil)
        #expect(
            m.storeRecord(onlyIfChanged: true, slack: .seconds(60), now: t0, wallClock: Date(), idleTimeout: .seconds(600)) == nil,
            "nothing changed")
        let anonymous = m.charge(cachedBytes: 100).anonymous
        #expect(anonymous, "the memory budget's standing: anonymous")
        #expect(
            describe(m.received(.loginChanged(LoginResult(userId: "u1", token: "resume-token", tokenExpires: nil)), now: t0)) == ["deliver 2:user"])
        #expect(m.userID == "u1" && m.loginToken == "resume-token")
        let standing = m.charge(cachedBytes: 100).anonymous
        #expect(!standing, "a logged-in session's standing")
        m.claimLogin(token: "resume-token", byBridge: true)
        let saved = m.storeRecord(onlyIfChanged: true, slack: .seconds(60), now: t0, wallClock: Date(), idleTimeout: .seconds(600))
        #expect(saved?.userID == "u1" && saved?.loginToken == "resume-token" && saved?.bridgeLogin == true && saved?.version == 2)

        // A new token for the same user (another login call): no `user` event, saved, nobody's until claimed.
        #expect(m.received(.loginChanged(LoginResult(userId: "u1", token: "second", tokenExpires: nil)), now: t0).isEmpty)
        m.claimLogin(token: "resume-token", byBridge: true)
        let second = m.storeRecord(onlyIfChanged: true, slack: .seconds(60), now: t0, wallClock: Date(), idleTimeout: .seconds(600))
        #expect(second?.loginToken == "second" && second?.bridgeLogin == false, "a claim for a token no longer held is ignored")

        // A logout (by any route): anonymous again, and so stored.
        #expect(describe(m.received(.loginChanged(nil), now: t0)) == ["deliver 3:user"])
        let out = m.storeRecord(onlyIfChanged: true, slack: .seconds(60), now: t0, wallClock: Date(), idleTimeout: .seconds(600))
        #expect(out != nil && out?.userID == nil && out?.loginToken == nil && out?.bridgeLogin == false)
        #expect(m.loginLost == nil, "a logout on purpose loses nothing")
    }

    /// A refused resume is a lost login: the streams end with `login-lost`, requests get 401
    /// `login-lost` (waiting ones too, when the connection closes), no stream is admitted, and
    /// the session is never stored as an anonymous one.
    @Test func aRefusedResumeIsALostLogin() {
        var m = machine(window: .zero)
        _ = m.received(.stateChanged(.connected(session: "s", version: "1")), now: t0)
        _ = m.received(.loginChanged(LoginResult(userId: "u1", token: "resume-token", tokenExpires: nil)), now: t0)
        m.claimLogin(token: "resume-token", byBridge: true)
        _ = m.received(.stateChanged(.reconnecting(attempt: 1, delay: .milliseconds(10), cause: nil)), now: t0)
        _ = m.received(.stateChanged(.connected(session: "s2", version: "1")), now: t0)
        let refusal = DDPError.meteor(403, "You've been logged out by the server. Please log in again.")
        #expect(describe(m.received(.resumeRefused(refusal), now: t0)) == ["finish streams login-lost"])
        #expect(m.loginLost?.status == .unauthorized && m.loginLost?.error == "login-lost")
        #expect(m.loginLost?.details?["upstream"]?["reason"] == "You've been logged out by the server. Please log in again.")
        #expect(m.loginLost?.reason.contains("You've been logged out by the server") == true)
        #expect(m.lostLoginEnding.flatMap(Self.lastErrorCode) == "login-lost")
        #expect(m.received(.resumeRefused(refusal), now: t0).isEmpty, "once")
        _ = m.received(.loginChanged(nil), now: t0)
        let closed = m.received(.stateChanged(.closed(reason: "the login was lost")), now: t0)
        #expect(describe(closed).first == "fail waiters login-lost")
        guard case .refused(let refused) = m.connectionWait else {
            Issue.record("a request after the loss is refused")
            return
        }
        #expect(refused.error == "login-lost")
        #expect(#expect(throws: BridgeError.self) { try m.admitStream(limit: 9) }?.error == "login-lost")
        #expect(m.storeRecord(onlyIfChanged: false, slack: .zero, now: t0, wallClock: Date(), idleTimeout: .seconds(600)) == nil)
        #expect(m.close(reason: "its login was lost", keepLogin: false)?.logOut == false, "nothing left to log out")
    }

    @Test func theIdleDeadlineCountsFromTheLastActivityUnlessAStreamIsOpen() {
        var m = machine()
        let wall = Date(timeIntervalSince1970: 1_000)
        let idle = Duration.seconds(600)
        let r2 = m.storeRecord(onlyIfChanged: false, slack: .zero, now: t0 + .seconds(100), wallClock: wall, idleTimeout: idle)?.expiresAt
        #expect(r2 == 1_500_000)
        #expect(!m.isIdle(now: t0 + .seconds(599), timeout: idle) && m.isIdle(now: t0 + .seconds(600), timeout: idle))
        try? m.admitStream(limit: 1)
        #expect(!m.isIdle(now: t0 + .seconds(10_000), timeout: idle), "an open stream is activity")
        let r3 = m.storeRecord(onlyIfChanged: false, slack: .zero, now: t0 + .seconds(100), wallClock: wall, idleTimeout: idle)?.expiresAt
        #expect(r3 == 1_600_000)
        m.streamDetached(now: t0 + .seconds(700))
        #expect(!m.isIdle(now: t0 + .seconds(1_299), timeout: idle) && m.isIdle(now: t0 + .seconds(1_300), timeout: idle))
    }

    @Test func streamsAreAdmittedUpToTheLimitAndNeverOnAClosedSession() {
        var m = machine()
        #expect(throws: Never.self) { try m.admitStream(limit: 2) }
        #expect(throws: Never.self) { try m.admitStream(limit: 2) }
        #expect(#expect(throws: BridgeError.self) { try m.admitStream(limit: 2) }?.error == "too-many-streams")
        m.streamDetached(now: t0)
        #expect(throws: Never.self) { try m.admitStream(limit: 2) }
        _ = m.close(reason: "logged out", keepLogin: false)
        #expect(#expect(throws: BridgeError.self) { try m.admitStream(limit: 9) }?.error == "session-expired")
    }

    @Test func closingGivesTheChargeBackOnceAndLogsOutOnlyWhatTheBridgeLoggedIn() {
        var m = machine()
        m.logIn(token: "t", byBridge: true, now: t0)
        let log = m.charge(cachedBytes: 0).delta  // the login's `user` event, in the log
        let r4 = m.charge(cachedBytes: 1_000)
        #expect(r4 == (1_000, false))
        let r5 = m.charge(cachedBytes: 1_200)
        #expect(r5 == (200, false), "only the change is charged")
        let kept = m.close(reason: "restart", keepLogin: true)
        #expect(kept?.logOut == false && kept?.charged == 1_200 + log && kept?.anonymous == false)
        #expect(String(decoding: kept?.ending ?? [], as: UTF8.self).contains("session-ended") == true)
        let r6 = m.close(reason: "again", keepLogin: false)
        #expect(r6 == nil, "once")
        let r7 = m.charge(cachedBytes: 5_000)
        #expect(r7 == (0, false), "a closed session holds nothing more")

        var other = machine()
        other.logIn(token: "t", byBridge: true, now: t0)
        let r8 = other.close(reason: "deleted", keepLogin: false)?.logOut
        #expect(r8 == true)
        var brought = machine()
        brought.logIn(token: "t", byBridge: false, now: t0)
        let r9 = brought.close(reason: "deleted", keepLogin: false)?.logOut
        #expect(r9 == false, "a token the client brought is the client's")
    }

    @Test func aBudgetStopIsAskedOnceUntilTheChargeIsBackWithin() {
        var m = machine()
        let r10 = m.budgetStop(within: false, delta: 100)
        #expect(r10)
        let r11 = m.budgetStop(within: false, delta: 100)
        #expect(!r11, "one stop under way")
        let r12 = m.budgetStop(within: true, delta: -500)
        #expect(!r12)
        let r13 = m.budgetStop(within: false, delta: -10)
        #expect(!r13, "a shrinking charge stops nothing")
        let r14 = m.budgetStop(within: false, delta: 10)
        #expect(r14)
    }

    @Test func savesAskedDuringAWriteShareTheNextOne() {
        var m = machine()
        let r15 = m.leadSave()
        #expect(r15, "the first caller writes")
        let r16 = m.leadSave()
        #expect(!r16 && !m.leadSave(), "the others wait for the next write")
        m.saveEnded(othersWaiting: true)
        let r17 = m.leadSave()
        #expect(!r17, "the waiting callers' write is under way")
        m.saveEnded(othersWaiting: false)
        let r18 = m.leadSave()
        #expect(r18, "no write under way: the next caller writes")
    }

    @Test func theStoreIsAskedAboutASessionOncePerInterval() {
        var m = machine()
        let r19 = m.claimStoreCheck(every: .seconds(2), now: t0)
        #expect(r19)
        let r20 = m.claimStoreCheck(every: .seconds(2), now: t0 + .seconds(1))
        #expect(!r20)
        let r21 = m.claimStoreCheck(every: .seconds(2), now: t0 + .seconds(2))
        #expect(r21)
    }
}

extension SessionStateMachine {
    /// The connection logged in with `token` (as user `u-token`), claimed by its maker.
    mutating func logIn(token: String, byBridge: Bool, now: ContinuousClock.Instant) {
        _ = received(.loginChanged(LoginResult(userId: "u-" + token, token: token, tokenExpires: nil)), now: now)
        claimLogin(token: token, byBridge: byBridge)
    }
}
