import DDP
import Testing

typealias Action = DDPConnectionStateMachine.Action

/// A connection driven by hand: events in, actions out, time passed explicitly.
struct Harness {
    var machine: DDPConnectionStateMachine
    var now = ContinuousClock.now

    init(_ configuration: DDPClientConfiguration = DDPClientConfiguration()) {
        machine = DDPConnectionStateMachine(configuration: configuration)
    }

    /// Starts and completes the handshake; returns what the connection sent after `connected`.
    @discardableResult
    mutating func connect(session: String = "S1") -> [Action] {
        _ = machine.start()
        _ = machine.transportOpened(at: now)
        return machine.received(.connected(session: session), at: now)
    }

    mutating func receive(_ message: ServerMessage) -> [Action] { machine.received(message, at: now) }

    /// Drops the link and brings it back; returns what was sent after the new `connected`.
    mutating func reconnect(session: String = "S2") -> [Action] {
        _ = machine.transportClosed(at: now, unit: 0.5)
        _ = machine.reconnectTimerFired()
        _ = machine.transportOpened(at: now)
        return machine.received(.connected(session: session), at: now)
    }
}

func sent(_ actions: [Action]) -> [ClientMessage] {
    actions.compactMap { if case .send(let m) = $0 { return m } else { return nil } }
}

func changes(_ actions: [Action]) -> [DocumentChange] {
    actions.flatMap { if case .documentsChanged(let c) = $0 { return c.map(\.change) } else { return [] } }
}

@Suite struct ConnectionStateMachineTests {
    @Test func handshakeOffersVersionsAndReportsConnected() {
        var h = Harness()
        #expect(h.machine.start() == [.stateChanged(.connecting(attempt: 0)), .openTransport])
        #expect(h.machine.transportOpened(at: h.now) == [.send(.connect(version: "1", support: ["1", "pre2", "pre1"]))])
        #expect(h.receive(.connected(session: "abc")) == [.stateChanged(.connected(session: "abc", version: "1"))])
        #expect(h.machine.isConnected)
    }

    @Test func failedWithASupportedVersionReconnectsWithIt() {
        var h = Harness()
        _ = h.machine.start()
        _ = h.machine.transportOpened(at: h.now)
        #expect(h.receive(.failed(version: "pre1")) == [.closeTransport, .scheduleReconnect(after: .zero)])
        _ = h.machine.transportClosed(at: h.now, unit: 0)
        _ = h.machine.reconnectTimerFired()
        #expect(h.machine.transportOpened(at: h.now) == [.send(.connect(version: "pre1", support: ["1", "pre2", "pre1"]))])
    }

    @Test func failedWithAnUnknownVersionBacksOffAndTriesAgainSayingWhy() {
        var h = Harness()
        _ = h.machine.start()
        _ = h.machine.transportOpened(at: h.now)
        let cause = UpstreamFailure(.versionRefused(offered: "99", ours: ["1", "pre2", "pre1"]))
        #expect(cause.message == "the upstream supports no DDP version we speak (it offered '99'; the bridge speaks 1, pre2, pre1)")
        #expect(h.receive(.failed(version: "99")) == [.closeTransport])
        let closed = h.machine.transportClosed(at: h.now, unit: 0.5, failure: UpstreamFailure(.closed(.handshake)))
        #expect(closed.contains(.stateChanged(.reconnecting(attempt: 1, delay: .milliseconds(500), cause: cause))), "its own cause comes first")
        #expect(closed.contains(.scheduleReconnect(after: .milliseconds(500))))
        // The next attempt offers our preferred version again, and can connect.
        #expect(h.machine.reconnectTimerFired() == [.stateChanged(.connecting(attempt: 1)), .openTransport])
        #expect(h.machine.transportOpened(at: h.now) == [.send(.connect(version: "1", support: ["1", "pre2", "pre1"]))])
        #expect(h.receive(.connected(session: "S")) == [.stateChanged(.connected(session: "S", version: "1"))])
    }

    @Test func failedNamingTheVersionWeOfferedBacksOffToo() {
        var h = Harness()
        _ = h.machine.start()
        _ = h.machine.transportOpened(at: h.now)
        let cause = UpstreamFailure(.versionRefusedItself("1"))
        #expect(cause.message == "the upstream refused DDP version '1', which it names itself")
        #expect(h.receive(.failed(version: "1")) == [.closeTransport])
        #expect(h.machine.transportClosed(at: h.now, unit: 0).contains(.stateChanged(.reconnecting(attempt: 1, delay: .zero, cause: cause))))
    }

    @Test func aServerThatNamesAnotherVersionEachTimeIsNotASpin() {
        var h = Harness()
        _ = h.machine.start()
        _ = h.machine.transportOpened(at: h.now)
        #expect(h.receive(.failed(version: "pre1")) == [.closeTransport, .scheduleReconnect(after: .zero)])
        _ = h.machine.transportClosed(at: h.now, unit: 0)
        _ = h.machine.reconnectTimerFired()
        _ = h.machine.transportOpened(at: h.now)
        // Asked again for another version before any `connected`: that one is tried after a backoff.
        #expect(h.receive(.failed(version: "1")) == [.closeTransport])
        let closed = h.machine.transportClosed(at: h.now, unit: 0.5)
        let cause = UpstreamFailure(.versionUnstable(offered: "1"))
        #expect(cause.message == "the upstream keeps changing the DDP version it asks for (now '1')")
        #expect(closed.contains(.stateChanged(.reconnecting(attempt: 1, delay: .milliseconds(500), cause: cause))))
        #expect(closed.contains(.scheduleReconnect(after: .milliseconds(500))))
        _ = h.machine.reconnectTimerFired()
        #expect(h.machine.transportOpened(at: h.now) == [.send(.connect(version: "1", support: ["1", "pre2", "pre1"]))])
    }

    @Test func aDeadlineThatClosesTheTransportIsTheReasonOfTheRetry() {
        var h = Harness()
        _ = h.machine.start()
        _ = h.machine.transportOpened(at: h.now)
        let late = h.now + h.machine.configuration.connectTimeout
        let cause = UpstreamFailure(.timedOut(.handshake, after: .seconds(15)))
        #expect(cause.message == "the upstream did not answer the DDP handshake within 15 s")
        #expect(h.machine.tick(at: late) == [.closeTransport])
        #expect(h.machine.transportClosed(at: late, unit: 0).contains(.stateChanged(.reconnecting(attempt: 1, delay: .zero, cause: cause))))
    }

    @Test func pingsAreAnsweredWithTheirID() {
        var h = Harness()
        h.connect()
        #expect(h.receive(.ping(id: "p1")) == [.send(.pong(id: "p1"))])
        #expect(h.receive(.ping(id: nil)) == [.send(.pong(id: nil))])
    }

    @Test func heartbeatPingsAfterSilenceAndGivesUpAfterTheTimeout() {
        var h = Harness(DDPClientConfiguration(heartbeatInterval: .seconds(17.5), heartbeatTimeout: .seconds(15)))
        h.connect()
        #expect(h.machine.tick(at: h.now + .seconds(17)) == [])
        #expect(h.machine.tick(at: h.now + .seconds(17.5)) == [.send(.ping(id: nil))])
        #expect(h.machine.tick(at: h.now + .seconds(20)) == [], "one ping at a time")
        #expect(h.machine.tick(at: h.now + .seconds(32.5)) == [.closeTransport])
    }

    @Test func anyMessageCountsAsLife() {
        var h = Harness(DDPClientConfiguration(heartbeatInterval: .seconds(10), heartbeatTimeout: .seconds(5)))
        h.connect()
        #expect(h.machine.tick(at: h.now + .seconds(10)) == [.send(.ping(id: nil))])
        // A large data load keeps arriving instead of the pong: the link is alive.
        _ = h.machine.received(.added(collection: "c", id: "1", fields: [:]), at: h.now + .seconds(14))
        #expect(h.machine.tick(at: h.now + .seconds(16)) == [])
        #expect(h.machine.tick(at: h.now + .seconds(24)) == [.send(.ping(id: nil))])
    }

    @Test func aMethodCompletesOnlyWithBothResultAndUpdated() {
        var h = Harness()
        h.connect()
        let (id, actions) = h.machine.callMethod("/tasks/insert", params: [["text": "x"]], options: MethodOptions(randomSeed: "seed"))
        #expect(sent(actions) == [.method(id: id, method: "/tasks/insert", params: [["text": "x"]], randomSeed: "seed")])
        #expect(h.receive(.result(id: id, outcome: .success("newid"))) == [.methodResult(id: id, outcome: .success("newid"))])
        #expect(changes(h.receive(.added(collection: "tasks", id: "newid", fields: ["text": "x"]))).count == 1)
        #expect(h.receive(.updated(methods: [id])) == [.methodCompleted(id: id, outcome: .success("newid"))])
        #expect(h.machine.pendingMethodCount == 0)
    }

    @Test func updatedBeforeResultCompletesAtTheResult() {
        var h = Harness()
        h.connect()
        let (id, _) = h.machine.callMethod("echo", params: [1])
        #expect(h.receive(.updated(methods: [id])) == [])
        let error = DDPError.meteor("bad-thing", "it broke")
        #expect(
            h.receive(.result(id: id, outcome: .failure(error))) == [
                .methodResult(id: id, outcome: .failure(.server(error))), .methodCompleted(id: id, outcome: .failure(.server(error)))
            ])
    }

    @Test func waitMethodsRunAloneInOrder() {
        var h = Harness()
        h.connect()
        let (a, first) = h.machine.callMethod("a", params: [])
        let (b, second) = h.machine.callMethod("b", params: [], options: MethodOptions(wait: true))
        let (c, third) = h.machine.callMethod("c", params: [])
        #expect(sent(first).count == 1)
        #expect(sent(second).isEmpty && sent(third).isEmpty)
        _ = h.receive(.result(id: a, outcome: .success(nil)))
        let afterA = h.receive(.updated(methods: [a]))
        #expect(sent(afterA) == [.method(id: b, method: "b", params: [], randomSeed: nil)])
        _ = h.receive(.updated(methods: [b]))
        let afterB = h.receive(.result(id: b, outcome: .success(nil)))
        #expect(sent(afterB) == [.method(id: c, method: "c", params: [], randomSeed: nil)])
    }

    @Test func callsMadeBeforeConnectingAreSentOnConnect() {
        var h = Harness()
        _ = h.machine.start()
        let (sub, subActions) = h.machine.subscribe("tasks", params: [])
        let (method, methodActions) = h.machine.callMethod("echo", params: [])
        #expect(subActions.isEmpty && methodActions.isEmpty)
        #expect(sent(h.connect()) == [.method(id: method, method: "echo", params: [], randomSeed: nil), .sub(id: sub, name: "tasks", params: [])])
    }

    @Test func subscriptionsGetReadyOrStopWithTheirError() {
        var h = Harness()
        h.connect()
        let (s1, a1) = h.machine.subscribe("tasks", params: [])
        #expect(sent(a1) == [.sub(id: s1, name: "tasks", params: [])])
        #expect(h.receive(.ready(subs: [s1])) == [.subscriptionReady(id: s1)])
        let (s2, _) = h.machine.subscribe("failing", params: [])
        let error = DDPError.meteor("not-authorized", "This publication always fails")
        #expect(h.receive(.nosub(id: s2, error: error)) == [.subscriptionStopped(id: s2, error: .server(error))])
        #expect(h.machine.unsubscribe(s1) == [.subscriptionStopped(id: s1, error: nil), .send(.unsub(id: s1))])
        #expect(h.machine.subscriptions.isEmpty)
    }

    @Test func dataMessagesReportWhatChanged() {
        var h = Harness()
        h.connect()
        #expect(
            changes(h.receive(.added(collection: "tasks", id: "a", fields: ["text": "x", "done": false]))) == [
                .added(collection: "tasks", id: "a", fields: ["text": "x", "done": false])
            ])
        #expect(
            changes(h.receive(.changed(collection: "tasks", id: "a", fields: ["done": true], cleared: ["text"]))) == [
                .changed(collection: "tasks", id: "a", fields: ["done": true], cleared: ["text"], previous: ["done": false, "text": "x"])
            ])
        #expect(changes(h.receive(.changed(collection: "tasks", id: "a", fields: ["done": true], cleared: []))).isEmpty, "no-op change")
        #expect(changes(h.receive(.removed(collection: "tasks", id: "a"))) == [.removed(collection: "tasks", id: "a", previous: ["done": true])])
        #expect(h.machine.cache.documentCount == 0)
    }

    @Test func loginAndLogoutChangeTheUser() {
        var h = Harness()
        h.connect()
        let (id, actions) = h.machine.login(.password(user: .username("alice"), password: "secret"))
        #expect(sent(actions).count == 1)
        let result: EJSON = ["id": "U1", "token": "T1", "tokenExpires": .date(1_000), "type": "password"]
        #expect(
            h.receive(.result(id: id, outcome: .success(result))).contains(.loginChanged(LoginResult(userId: "U1", token: "T1", tokenExpires: 1_000)))
        )
        _ = h.receive(.updated(methods: [id]))
        #expect(h.machine.userID == "U1" && h.machine.loginToken == "T1" && h.machine.tokenExpires == 1_000)
        let (out, _) = h.machine.logout()
        _ = h.receive(.updated(methods: [out]))
        #expect(h.receive(.result(id: out, outcome: .success(nil))).contains(.loginChanged(nil)))
        #expect(h.machine.loginToken == nil)
    }

    @Test func aFailedPasswordLoginKeepsTheCurrentUser() {
        var h = Harness()
        h.connect()
        let (first, _) = h.machine.login(.password(user: .username("alice"), password: "secret"))
        _ = h.receive(.result(id: first, outcome: .success(["id": "U1", "token": "T1"])))
        _ = h.receive(.updated(methods: [first]))
        let (second, _) = h.machine.login(.password(user: .username("alice"), password: "wrong"))
        let actions = h.receive(.result(id: second, outcome: .failure(.meteor(403, "Incorrect password"))))
        #expect(!actions.contains { if case .loginChanged = $0 { return true } else { return false } })
        #expect(h.machine.userID == "U1")
    }

    /// docs/ARCHITECTURE.md "Reconnecting": resume first, methods after it, subs with their ids,
    /// data buffered until quiescence, then only the net difference.
    @Test func reconnectResyncsAndReportsOnlyTheNetDifference() {
        var h = Harness()
        h.connect()
        let (login, _) = h.machine.login(.resume(token: "T1"))
        _ = h.receive(.result(id: login, outcome: .success(["id": "U1", "token": "T1"])))
        _ = h.receive(.updated(methods: [login]))
        let (sub, _) = h.machine.subscribe("tasks", params: [])
        _ = h.receive(.added(collection: "tasks", id: "a", fields: ["n": 1]))
        _ = h.receive(.added(collection: "tasks", id: "b", fields: ["n": 2]))
        _ = h.receive(.added(collection: "tasks", id: "gone", fields: ["n": 3]))
        _ = h.receive(.ready(subs: [sub]))
        let (pending, _) = h.machine.callMethod("echo", params: ["again"])

        let closed = h.machine.transportClosed(at: h.now, unit: 0.5)
        #expect(closed.contains(.stateChanged(.reconnecting(attempt: 1, delay: .milliseconds(500), cause: nil))))
        #expect(closed.contains(.scheduleReconnect(after: .milliseconds(500))))
        #expect(h.machine.reconnectTimerFired() == [.stateChanged(.connecting(attempt: 1)), .openTransport])
        _ = h.machine.transportOpened(at: h.now)
        let afterConnect = sent(h.receive(.connected(session: "S2")))
        guard case .method(let resume, "login", [["resume": "T1"]], nil)? = afterConnect.first else {
            Issue.record("the resume login must go first, got \(afterConnect)")
            return
        }
        #expect(afterConnect.dropFirst() == [.sub(id: sub, name: "tasks", params: [])], "other methods wait for the login")

        // The server re-sends everything; nothing reaches consumers yet.
        var buffered: [Action] = []
        buffered += h.receive(.added(collection: "tasks", id: "a", fields: ["n": 1]))
        buffered += h.receive(.added(collection: "tasks", id: "b", fields: ["n": 20]))
        buffered += h.receive(.added(collection: "tasks", id: "new", fields: ["n": 4]))
        buffered += h.receive(.ready(subs: [sub]))
        buffered += h.receive(.result(id: resume, outcome: .success(["id": "U1", "token": "T1"])))
        #expect(changes(buffered).isEmpty)
        #expect(h.machine.cache.document("tasks", "gone") != nil, "the old view stays until quiescence")
        let afterLogin = h.receive(.updated(methods: [resume]))
        #expect(sent(afterLogin) == [.method(id: pending, method: "echo", params: ["again"], randomSeed: nil)], "re-sent after the login")
        #expect(changes(afterLogin).isEmpty, "a re-sent method blocks quiescence")
        _ = h.receive(.result(id: pending, outcome: .success(["again"])))
        let done = h.receive(.updated(methods: [pending]))
        #expect(
            changes(done) == [
                .removed(collection: "tasks", id: "gone", previous: ["n": 3]),
                .changed(collection: "tasks", id: "b", fields: ["n": 20], cleared: [], previous: ["n": 2]),
                .added(collection: "tasks", id: "new", fields: ["n": 4])
            ])
        #expect(done.contains(.subscriptionReady(id: sub)))
        #expect(done.contains(.methodCompleted(id: pending, outcome: .success(["again"]))))
        #expect(h.machine.userID == "U1")
        #expect(!h.machine.isWaitingForQuiescence)
    }

    @Test func aReconnectThatChangedNothingEmitsNoDocumentEvents() {
        var h = Harness()
        h.connect()
        let (sub, _) = h.machine.subscribe("tasks", params: [])
        _ = h.receive(.added(collection: "tasks", id: "a", fields: ["n": 1, "s": "x"]))
        _ = h.receive(.ready(subs: [sub]))
        var all = h.reconnect()
        all += h.receive(.added(collection: "tasks", id: "a", fields: ["s": "x", "n": 1]))
        all += h.receive(.ready(subs: [sub]))
        #expect(changes(all).isEmpty)
        #expect(!h.machine.isWaitingForQuiescence)
        #expect(h.machine.cache.document("tasks", "a") == ["n": 1, "s": "x"])
    }

    @Test func aRefusedResumeTokenIsReportedOnce() {
        var h = Harness()
        h.connect()
        let (login, _) = h.machine.login(.resume(token: "T1"))
        _ = h.receive(.result(id: login, outcome: .success(["id": "U1", "token": "T1"])))
        _ = h.receive(.updated(methods: [login]))
        let sentAfter = sent(h.reconnect())
        guard case .method(let resume, "login", _, _)? = sentAfter.first else {
            Issue.record("expected a resume login")
            return
        }
        let refusal = DDPError.meteor(403, "You've been logged out by the server. Please log in again.")
        let actions = h.receive(.result(id: resume, outcome: .failure(refusal))) + h.receive(.updated(methods: [resume]))
        #expect(actions.contains(.resumeRefused(refusal)))
        #expect(actions.contains(.loginChanged(nil)))
        #expect(sent(actions).isEmpty, "no second attempt")
        #expect(h.machine.loginToken == nil)
        #expect(sent(h.reconnect(session: "S3")).isEmpty, "a later reconnect has no token to try")
    }

    /// The connection's login is what the upstream says, whatever call made it: `login`,
    /// `createUser` and `logout` called by name are the accounts calls (`wait` methods, as
    /// Meteor's accounts client calls them), and any login-shaped result logs the connection in,
    /// so its token is the one resumed after a reconnect.
    @Test func aLoginByAnyCallIsTheConnectionsLogin() {
        var h = Harness()
        h.connect()
        let (id, actions) = h.machine.callMethod("login", params: [["user": ["username": "alice"], "password": "secret"]])
        #expect(sent(actions).count == 1)
        let (behind, queued) = h.machine.callMethod("echo", params: [])
        #expect(sent(queued).isEmpty, "a login by name is a wait method: later calls wait for it")
        let login: EJSON = ["id": "U1", "token": "T1", "tokenExpires": .date(1_000), "type": "password"]
        let answered = h.receive(.result(id: id, outcome: .success(login)))
        #expect(answered.first == .loginChanged(LoginResult(userId: "U1", token: "T1", tokenExpires: 1_000)), "before the caller hears of it")
        #expect(sent(h.receive(.updated(methods: [id]))) == [.method(id: behind, method: "echo", params: [], randomSeed: nil)])
        #expect(h.machine.userID == "U1" && h.machine.loginToken == "T1")

        // A method of the app's own that logs in the way `login` does (resetPassword, say): a new token.
        let (other, _) = h.machine.callMethod("resetPassword", params: ["t", "p"])
        #expect(
            h.receive(.result(id: other, outcome: .success(["id": "U1", "token": "T2"]))).contains(
                .loginChanged(LoginResult(userId: "U1", token: "T2", tokenExpires: nil))))
        // A result that is not login-shaped changes nothing.
        let (plain, _) = h.machine.callMethod("whoami", params: [])
        #expect(!h.receive(.result(id: plain, outcome: .success(["id": "U2"]))).contains { if case .loginChanged = $0 { true } else { false } })
        _ = h.receive(.updated(methods: [behind, other, plain]))
        guard case .method(_, "login", [["resume": "T2"]], nil)? = sent(h.reconnect()).first else {
            Issue.record("the reconnect resumes the newest login")
            return
        }

        var out = Harness()
        out.connect()
        let (signUp, _) = out.machine.callMethod("createUser", params: [["username": "carol"]])
        #expect(
            out.receive(.result(id: signUp, outcome: .success(["id": "U3", "token": "T3"]))).contains(
                .loginChanged(LoginResult(userId: "U3", token: "T3", tokenExpires: nil))))
        _ = out.receive(.updated(methods: [signUp]))
        let (logout, _) = out.machine.callMethod("logout", params: [])
        _ = out.receive(.updated(methods: [logout]))
        #expect(out.receive(.result(id: logout, outcome: .success(nil))).contains(.loginChanged(nil)))
        #expect(out.machine.userID == nil && out.machine.loginToken == nil)
        #expect(sent(out.reconnect(session: "S3")).isEmpty, "nothing to resume after a logout")
    }

    /// With ``DDPClientConfiguration/closesWhenLoginIsLost``, a refused resume closes the
    /// connection at once: the calls waiting behind the resume are never sent (they would run
    /// anonymous) and fail with `login-lost`, as does any call made afterwards.
    @Test func aLostLoginClosesTheConnectionWhenTheOwnerAsks() {
        var h = Harness(DDPClientConfiguration(closesWhenLoginIsLost: true))
        h.connect()
        let (login, _) = h.machine.login(.password(user: .username("alice"), password: "secret"))
        _ = h.receive(.result(id: login, outcome: .success(["id": "U1", "token": "T1"])))
        _ = h.receive(.updated(methods: [login]))
        _ = h.machine.transportClosed(at: h.now, unit: 0.5)
        let (pending, _) = h.machine.callMethod("insertTask", params: [])
        _ = h.machine.reconnectTimerFired()
        _ = h.machine.transportOpened(at: h.now)
        let afterConnect = sent(h.receive(.connected(session: "S2")))
        guard case .method(let resume, "login", [["resume": "T1"]], nil)? = afterConnect.first else {
            Issue.record("the resume login goes first, got \(afterConnect)")
            return
        }
        let refusal = DDPError.meteor(403, "You've been logged out by the server. Please log in again.")
        let actions = h.receive(.result(id: resume, outcome: .failure(refusal)))
        let lost = DDPClientError.loginLost(refusal)
        #expect(lost.code == .loginLost && lost.details?["upstream"]?["reason"] == .string(refusal.reason ?? ""))
        #expect(actions.prefix(2) == [.resumeRefused(refusal), .loginChanged(nil)])
        #expect(actions.contains(.methodCompleted(id: pending, outcome: .failure(.local(lost)))))
        #expect(actions.contains(.closeTransport))
        #expect(actions.last == .stateChanged(.closed(reason: "the login was lost (its resume token was refused)")))
        #expect(sent(actions + h.receive(.updated(methods: [resume]))).isEmpty, "nothing runs anonymous")
        #expect(h.machine.closedFailure == lost)
        let (later, refused) = h.machine.callMethod("echo", params: [])
        #expect(refused.contains(.methodCompleted(id: later, outcome: .failure(.local(lost)))))
        #expect(h.machine.transportClosed(at: h.now, unit: 0.5).isEmpty, "no reconnect")
    }

    @Test func atMostOnceMethodsFailInsteadOfBeingResent() {
        var h = Harness()
        h.connect()
        let (once, _) = h.machine.callMethod("charge", params: [], options: MethodOptions(atMostOnce: true))
        let (again, _) = h.machine.callMethod("echo", params: [])
        let closed = h.machine.transportClosed(at: h.now, unit: 0)
        #expect(
            closed.contains {
                if case .methodCompleted(once, .failure(.server(let e))) = $0 { return e.error == .string("invocation-failed") } else { return false }
            })
        _ = h.machine.reconnectTimerFired()
        _ = h.machine.transportOpened(at: h.now)
        #expect(sent(h.receive(.connected(session: "S2"))) == [.method(id: again, method: "echo", params: [], randomSeed: nil)])
    }

    @Test func closingFailsPendingCalls() {
        var h = Harness()
        h.connect()
        let (id, _) = h.machine.callMethod("sleep", params: [1000])
        let actions = h.machine.close(reason: "session ended")
        #expect(actions.contains(.closeTransport))
        #expect(actions.contains { if case .methodCompleted(id, .failure) = $0 { return true } else { return false } })
        #expect(actions.last == .stateChanged(.closed(reason: "session ended")))
        #expect(
            h.machine.callMethod("x", params: []).actions.contains {
                if case .methodCompleted(_, .failure) = $0 { return true } else { return false }
            })
    }

    @Test func backoffGrowsWithJitterAndIsCapped() {
        let policy = ReconnectPolicy(initialDelay: .seconds(1), multiplier: 2, maxDelay: .seconds(30), jitter: 0.5)
        #expect(policy.delay(attempt: 0, unit: 0.5) == .milliseconds(750))
        #expect(policy.delay(attempt: 3, unit: 0.5) == .seconds(6))
        #expect(policy.delay(attempt: 20, unit: 0.5) == .milliseconds(22_500))
        #expect(policy.delay(attempt: 0, unit: 0) == .milliseconds(500))
        #expect(policy.delay(attempt: 0, unit: 0.999_999) > .milliseconds(999))
        // The default is full jitter: anywhere from zero to the backoff.
        #expect(ReconnectPolicy().delay(attempt: 0, unit: 0) == .zero)
        #expect(ReconnectPolicy().delay(attempt: 2, unit: 0.25) == .seconds(1))
        // Out-of-range settings never trap.
        #expect(
            ReconnectPolicy(initialDelay: .seconds(1), multiplier: 1e300, maxDelay: .seconds(1e12)).delay(attempt: 64, unit: 1) == .seconds(86_400))
        var h = Harness()
        h.connect()
        var delays: [Duration] = []
        for _ in 0..<4 {
            for case .scheduleReconnect(let d) in h.machine.transportClosed(at: h.now, unit: 0.5) { delays.append(d) }
            _ = h.machine.reconnectTimerFired()
        }
        #expect(delays == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4)])
    }
}
