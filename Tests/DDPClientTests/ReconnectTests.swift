import DDP
import DDPClient
import DDPServer
import FaultKit
import HashTreeCollections
import Logging
import Synchronization
import Testing

/// The upstream goes away and comes back on the same port.
///
/// An attempt that reaches the server as it stops or starts can hang until its connect deadline
/// (10 s by default, as long as these tests wait): the clients here give up on one after 2 s and
/// try again (a full parallel run failed once when one did).
@Suite struct ReconnectTests {
    static func quickToRetry(_ options: inout DDPClientOptions) { options.protocolConfiguration.connectTimeout = .seconds(2) }

    /// An upstream that goes without a close frame (killed, or a proxy dropping it: only its FIN
    /// arrives) is noticed at once, not when the heartbeat finds the link silent (17.5 s + 15 s).
    @Test func anUpstreamThatVanishesWithoutACloseFrameIsNoticedAtOnce() async throws {
        let server = try await startDemoServer()
        let proxy = FaultProxy(targetPort: try #require(await server.port))
        try await proxy.start()
        try await withClient("ws://127.0.0.1:\(proxy.port)/websocket") { client, log in
            let before = log.reconnects
            await proxy.inject(.kill)
            try await log.wait("the drop to be noticed", timeout: .seconds(3)) { _ in log.reconnects > before }
            try await log.waitFor("connected again") { await client.isConnected }
            #expect(try await client.call("echo", params: [1]) == [1])
        }
        await proxy.stop()
        await server.stop()
    }

    /// The connect-and-reconnect loop needs no task: started, it connects, reconnects after a
    /// restart, and stops on close (its `whenStopped` runs once); closed before it starts, it
    /// stops at once; a cancelled `run()` closes it as "stopped".
    @Test func theConnectionLoopRunsWithoutATaskAndStopsWhenClosed() async throws {
        let server = try await startDemoServer()
        let url = await server.url
        let port = try #require(await server.port)
        var options = DDPClientOptions(url: url)
        options.protocolConfiguration.reconnect = ReconnectPolicy(initialDelay: .milliseconds(50), maxDelay: .milliseconds(200))
        Self.quickToRetry(&options)
        let stops = Mutex(0)
        let log = ClientEventRecorder()
        let client = DDPClient(options: options, logger: Logger(label: "no-task"), events: ClosureEventSink { log.append($0) })
        await client.start { _ in
            stops.withLock { $0 += 1 }
            log.changes.signal()
        }
        try await log.waitFor("connected") { await client.isConnected }
        #expect(try await client.call("echo", params: [1]) == [1])
        await server.stop()
        try await log.waitFor("the drop noticed") { await !client.isConnected }
        try await server.start(port: port)
        try await log.waitFor("connected again") { await client.isConnected }
        #expect(try await client.call("echo", params: [2]) == [2])
        await client.close(reason: "done")
        try await log.waitFor("stopped") { stops.withLock { $0 } == 1 }
        #expect(await client.state == .closed(reason: "done"))
        await client.start { _ in stops.withLock { $0 += 1 } }
        #expect(stops.withLock { $0 } == 2, "a stopped loop runs a late whenStopped at once")

        let unstarted = DDPClient(options: options, logger: Logger(label: "unstarted"))
        await unstarted.close()
        await unstarted.run()  // returns: closed before it started

        let cancelledLog = ClientEventRecorder()
        let cancelled = DDPClient(options: options, logger: Logger(label: "cancelled"), events: ClosureEventSink { cancelledLog.append($0) })
        let running = Task { await cancelled.run() }
        try await cancelledLog.waitFor("connected") { await cancelled.isConnected }
        running.cancel()
        await running.value
        #expect(await cancelled.state == .closed(reason: "stopped"))
        await server.stop()
    }

    /// The bucket never hands out more than `burst` plus `rate` a second, whatever order callers
    /// that read the clock at nearly the same instant take its lock in (a caller with the older
    /// instant coming second credited the next one the interval again).
    @Test func thePacerGivesNoMoreSlotsThanItsRateWhenCallersComeOutOfOrder() {
        let pacer = ReconnectPacer(rate: 10, burst: 1)
        let t0 = ContinuousClock.now + .seconds(1)
        #expect(pacer.reserve(now: t0) == .zero)
        #expect(pacer.reserve(now: t0) == .milliseconds(100), "a debt of one slot, paid off in 100 ms")
        #expect(pacer.reserve(now: t0 + .milliseconds(200)) == .zero, "paid off, and a slot free again")
        // Read the clock before the previous caller, took the lock after it: the slot after.
        #expect(pacer.reserve(now: t0 + .milliseconds(100)) == .milliseconds(100))
        // Then the one after that, not the same slot again.
        #expect(pacer.reserve(now: t0 + .milliseconds(200)) == .milliseconds(200))
    }

    /// A connection waiting out a long backoff retries at once when asked (``DDPClient/retrySoon()``,
    /// what a request for its session does), and when another connection sharing its pacer is
    /// connected again (``ReconnectPacer/upstreamReturned()``). Neither wakes it otherwise.
    @Test(arguments: [false, true])
    func aBackoffEndsWhenTheUpstreamIsBackOrARequestAsks(byAnotherConnection: Bool) async throws {
        let server = try await startDemoServer()
        let url = await server.url
        let port = try #require(await server.port)
        let pacer = ReconnectPacer(rate: 100, burst: 10)
        try await withClient(
            url,
            configure: {
                Self.quickToRetry(&$0)
                $0.protocolConfiguration.reconnect = ReconnectPolicy(initialDelay: .seconds(60), multiplier: 2, maxDelay: .seconds(60), jitter: 0)
                $0.pacer = pacer
            }
        ) { client, log in
            await server.stop()
            // Checked as the client reports `reconnecting`; read on its actor, the state comes
            // after the step that reported it, which also registered the backoff with the pacer.
            try await log.waitFor("in a backoff") {
                if case .reconnecting = await client.state { pacer.waitingCount == 1 } else { false }
            }
            try await server.start(port: port)
            if byAnotherConnection {
                // Another connection of the process sharing the pacer is connected: every backoff ends.
                try await withClient(url, configure: { $0.pacer = pacer }) { _, _ in }
            } else {
                client.retrySoon()
            }
            try await log.waitFor("connected again, long before the 60 s backoff") { await client.isConnected }
            #expect(pacer.waitingCount == 0)
            #expect(log.states.contains { if case .reconnecting = $0 { true } else { false } })
        }
        await server.stop()
    }

    @Test func serverRestartWithChangesWhileDownYieldsOnlyTheNetDifference() async throws {
        let server = try await startDemoServer()
        let url = await server.url
        let port = try #require(await server.port)
        try await withClient(url, configure: Self.quickToRetry) { client, log in
            let login = try await client.login(.password(user: .username("alice"), password: "secret"))
            try await client.subscribe("tasks")
            try await client.subscribe("myTasks")
            log.clear()

            await server.stop()
            try await log.waitFor("reconnecting") { await !client.isConnected }
            // While the server is down: change one task, remove one, add one; task-a2 stays as it was.
            try await server.core.update("tasks", ["_id": "task-a1"], ["$set": ["done": true], "$unset": ["listId": 1]])
            try await server.core.remove("tasks", ["_id": "task-b1"])
            try await server.core.insert("tasks", ["_id": "task-c1", "text": "added while down", "owner": .string(login.userId), "done": false])
            try await server.start(port: port)

            try await log.waitFor("reconnected and resynced") {
                await client.isConnected && log.documentChanges.count >= 3
            }
            // A round trip orders after everything the upstream sent before it: a change more
            // (a document reported twice, one that did not change) would be in the log by now.
            #expect(try await client.call("echo", params: ["fence"]) == ["fence"])
            let changes = log.documentChanges
            let bob = try #require(try await server.core.find("users", ["username": "bob"]).first?["_id"])
            #expect(
                changes == [
                    .removed(
                        collection: "tasks", id: "task-b1",
                        previous: [
                            "text": "bob inbox task", "listId": "inbox", "owner": bob,
                            "done": false, "createdAt": .date(DemoDataSet.createdAt)
                        ]),
                    .changed(
                        collection: "tasks", id: "task-a1", fields: ["done": true], cleared: ["listId"], previous: ["done": false, "listId": "inbox"]),
                    .added(collection: "tasks", id: "task-c1", fields: ["text": "added while down", "owner": .string(login.userId), "done": false])
                ])
            #expect(!changes.contains { $0.id == "task-a2" }, "no event for a document that did not change")
            let expected1 = try await server.core.publishedView("tasks")
            #expect(
                await client.withCache { Dictionary(uniqueKeysWithValues: ($0.collections["tasks"]?.documents ?? [:]).map { ($0.key, $0.value) }) }
                    == expected1)
            #expect(await client.userID == login.userId, "the session resumed its login")
            let value2 = try await client.call("whoami")
            #expect(value2 == .string(login.userId))
            #expect(log.states.contains { if case .reconnecting = $0 { return true } else { return false } })
        }
        await server.stop()
    }

    @Test func aRestartWithoutChangesEmitsNoDocumentEvents() async throws {
        let server = try await startDemoServer()
        let port = try #require(await server.port)
        try await withClient(await server.url, configure: Self.quickToRetry) { client, log in
            _ = try await client.login(.password(user: .username("bob"), password: "hunter2"))
            try await client.subscribe("tasks")
            try await client.subscribe("myTasks")
            let before = await client.withCache { $0 }
            log.clear()
            await server.stop()
            try await log.waitFor("disconnected") { await !client.isConnected }
            try await server.start(port: port)
            try await log.waitFor("reconnected") { await client.isConnected }
            // Quiescence needs the re-sent subscriptions ready, and this call's `updated` (it was
            // sent during the resync): when it returns, the resync has reported whatever it would.
            _ = try await client.call("echo")
            #expect(log.documentChanges.isEmpty)
            #expect(await client.withCache { $0 } == before)
            #expect(log.all.contains(.subscriptionReady(id: "s1")) || log.all.contains(.subscriptionReady(id: "s2")))
        }
        await server.stop()
    }

    @Test func aRevokedResumeTokenLeavesTheSessionAnonymous() async throws {
        let server = try await startDemoServer()
        let port = try #require(await server.port)
        try await withClient(await server.url, configure: Self.quickToRetry) { client, log in
            let login = try await client.login(.password(user: .username("alice"), password: "secret"))
            await server.stop()
            try await server.core.revokeLoginTokens(userId: login.userId)
            try await server.start(port: port)
            try await log.wait("resume refused") { $0.contains { if case .resumeRefused = $0 { return true } else { return false } } }
            // Read on the client's actor, after the whole step that reported the refusal (the
            // log's wait ends as the refusal is reported, before the events after it in that step).
            #expect(await client.userID == nil)
            #expect(log.all.contains(.loginChanged(nil)))
            let value3 = try await client.call("whoami")
            #expect(value3 == .some(.null))
        }
        await server.stop()
    }
}
