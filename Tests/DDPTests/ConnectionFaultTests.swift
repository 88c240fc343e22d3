import DDP
import Testing

/// Faults of the upstream and of calls the owner gives up on, as protocol transcripts.
@Suite struct ConnectionFaultTests {
    private func completed(_ actions: [Action]) -> [(String, Result<EJSON?, DDPFailure>)] {
        actions.compactMap { if case .methodCompleted(let id, let outcome) = $0 { return (id, outcome) } else { return nil } }
    }

    @Test func pastTheDocumentLimitTheLoadingSubscriptionsAreStoppedOnce() {
        var h = Harness(DDPClientConfiguration(maxCachedDocuments: 3))
        h.connect()
        _ = h.machine.subscribe("small", params: [], id: "s1")
        _ = h.receive(.added(collection: "a", id: "a1", fields: [:]))
        _ = h.receive(.ready(subs: ["s1"]))
        _ = h.machine.subscribe("huge", params: [], id: "s2")
        for n in 1...2 { #expect(sent(h.receive(.added(collection: "b", id: "b\(n)", fields: [:]))).isEmpty) }
        // The fourth document is one too many: the loading subscription goes, not the ready one.
        let over = h.receive(.added(collection: "b", id: "b3", fields: [:]))
        #expect(sent(over) == [.unsub(id: "s2")])
        let stopped = over.compactMap { if case .subscriptionStopped(let id, let error) = $0 { return (id, error) } else { return nil } }
        #expect(stopped.count == 1 && stopped[0].0 == "s2" && stopped[0].1?.local?.code == .tooManyDocuments)
        #expect(h.machine.subscriptions.keys.sorted() == ["s1"])
        // Documents already on the wire still arrive; nothing more is stopped for them.
        #expect(sent(h.receive(.added(collection: "b", id: "b4", fields: [:]))).isEmpty)
        #expect(h.machine.subscriptions.keys.sorted() == ["s1"])
        // The server removes them; back under the limit, a later excess stops the newest subscription.
        for n in 1...4 { _ = h.receive(.removed(collection: "b", id: "b\(n)")) }
        #expect(h.machine.cache.documentCount == 1)
        _ = h.machine.subscribe("more", params: [], id: "s3")
        _ = h.receive(.ready(subs: ["s3"]))
        for n in 1...2 { _ = h.receive(.added(collection: "c", id: "c\(n)", fields: [:])) }
        #expect(sent(h.receive(.added(collection: "c", id: "c3", fields: [:]))) == [.unsub(id: "s3")])
    }

    @Test func anAbandonedCallNoLongerBlocksTheWaitCallBehindIt() {
        var h = Harness()
        h.connect()
        let (stuck, first) = h.machine.callMethod("echo", params: [])
        #expect(sent(first) == [.method(id: stuck, method: "echo", params: [], randomSeed: nil)])
        // A login is a `wait` method: it goes out only when the block before it is done.
        let (login, queued) = h.machine.login(.resume(token: "t"))
        #expect(sent(queued).isEmpty)
        let actions = h.machine.abandonMethod(stuck)
        #expect(sent(actions).map(\.id) == [login])
        #expect(h.machine.pendingMethodCount == 1)
        // The abandoned call's late result is ignored.
        #expect(h.receive(.result(id: stuck, outcome: .success(.int(1)))).isEmpty)
    }

    @Test func anAbandonedCallIsNotResentAfterAReconnect() {
        var h = Harness()
        h.connect()
        let (stuck, _) = h.machine.callMethod("echo", params: [])
        _ = h.machine.abandonMethod(stuck)
        let resent = h.reconnect()
        #expect(!sent(resent).contains { $0.id == stuck })
        #expect(h.machine.pendingMethodCount == 0)
    }

    @Test func anAbandonedCallDoesNotHoldTheResyncAfterAReconnect() {
        var h = Harness()
        h.connect()
        _ = h.machine.subscribe("items", params: [], id: "s1")
        _ = h.receive(.ready(subs: ["s1"]))
        _ = h.reconnect()
        let (call, _) = h.machine.callMethod("slow", params: [])
        _ = h.receive(.ready(subs: ["s1"]))
        #expect(h.machine.isWaitingForQuiescence, "the call sent since the reconnect holds the resync")
        _ = h.machine.abandonMethod(call)
        #expect(!h.machine.isWaitingForQuiescence)
    }

    @Test func aMethodTheServerRefusesAsAProtocolErrorFailsAtOnce() {
        var h = Harness()
        h.connect()
        let (id, _) = h.machine.callMethod("echo", params: [])
        let (login, queued) = h.machine.login(.resume(token: "t"))
        #expect(sent(queued).isEmpty)
        let offending: EJSON = ["msg": "method", "id": .string(id), "method": "echo"]
        let actions = h.receive(.error(reason: "Bad request", offendingMessage: offending))
        let failures = completed(actions)
        #expect(failures.count == 1 && failures.first?.0 == id)
        if case .failure(.server(let error))? = failures.first?.1 {
            #expect(error.reason?.contains("Bad request") == true)
        } else {
            Issue.record("no failure")
        }
        #expect(sent(actions).map(\.id) == [login], "the wait call behind it goes out")
    }

    @Test func theBackoffStartsOverOnlyAfterAConnectionStayedUp() {
        var configuration = DDPClientConfiguration()
        configuration.healthyAfter = .seconds(30)
        var h = Harness(configuration)
        h.connect()
        var delays: [Duration] = []
        for _ in 0..<3 {
            // Connects, then drops at once (an oversized document, a crashing publication).
            for case .scheduleReconnect(let d) in h.machine.transportClosed(at: h.now, unit: 0.5) { delays.append(d) }
            _ = h.machine.reconnectTimerFired()
            _ = h.machine.transportOpened(at: h.now)
            _ = h.receive(.connected(session: "again"))
        }
        #expect(delays == [.milliseconds(500), .seconds(1), .seconds(2)])
        #expect(h.machine.failedAttempts == 3)
        h.now += .seconds(31)
        for case .scheduleReconnect(let d) in h.machine.transportClosed(at: h.now, unit: 0.5) { #expect(d == .milliseconds(500)) }
    }

    @Test func theDDPHandshakeHasADeadline() {
        var configuration = DDPClientConfiguration()
        configuration.connectTimeout = .seconds(5)
        var h = Harness(configuration)
        _ = h.machine.start()
        _ = h.machine.transportOpened(at: h.now)
        #expect(!h.machine.tick(at: h.now + .seconds(4)).contains(.closeTransport))
        #expect(h.machine.tick(at: h.now + .seconds(5)).contains(.closeTransport))
    }

    @Test func anOversizedMessageFailsWhatWasStartingInsteadOfLooping() {
        var h = Harness()
        h.connect()
        _ = h.machine.subscribe("ready-one", params: [], id: "s1")
        _ = h.receive(.ready(subs: ["s1"]))
        _ = h.machine.subscribe("huge", params: [], id: "s2")
        let (call, _) = h.machine.callMethod("bigResult", params: [])
        let actions = h.machine.transportClosed(at: h.now, unit: 0.5, failure: UpstreamFailure(.messageTooLarge(limit: 1024)))
        let stopped = actions.compactMap { if case .subscriptionStopped(let id, let error) = $0 { return (id, error) } else { return nil } }
        #expect(stopped.map(\.0) == ["s2"])
        #expect(stopped.first?.1?.local?.code == .messageTooLarge)
        #expect(completed(actions).map(\.0) == [call])
        // After the reconnect only the healthy subscription is sent again, and no call.
        _ = h.machine.reconnectTimerFired()
        _ = h.machine.transportOpened(at: h.now)
        let resent = sent(h.receive(.connected(session: "S2")))
        #expect(resent == [.sub(id: "s1", name: "ready-one", params: [])])
    }

    @Test func aResyncThatNeverFinishesIsSwappedInAfterItsDeadline() {
        var configuration = DDPClientConfiguration()
        configuration.resyncTimeout = .seconds(10)
        var h = Harness(configuration)
        h.connect()
        _ = h.machine.subscribe("a", params: [], id: "s1")
        _ = h.machine.subscribe("b", params: [], id: "s2")
        _ = h.receive(.added(collection: "c", id: "1", fields: ["v": 1]))
        _ = h.receive(.ready(subs: ["s1", "s2"]))
        _ = h.reconnect()
        _ = h.receive(.added(collection: "c", id: "1", fields: ["v": 2]))
        _ = h.receive(.ready(subs: ["s1"]))  // s2 never comes back
        #expect(h.machine.isWaitingForQuiescence)
        h.now += .seconds(11)
        let actions = h.machine.tick(at: h.now)
        #expect(!h.machine.isWaitingForQuiescence)
        #expect(actions.contains { if case .warning = $0 { return true } else { return false } })
        #expect(changes(actions).count == 1)
    }
}

extension ClientMessage {
    /// The method id of a `method` message, for transcripts.
    var id: String? { if case .method(let id, _, _, _) = self { return id } else { return nil } }
}
