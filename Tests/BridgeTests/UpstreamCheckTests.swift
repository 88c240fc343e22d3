import DDP
import DDPServer
import FaultKit
import Logging
import Synchronization
import Testing

@testable import Bridge

/// `ddp-bridge check` as a library call against the in-process DDP server: each step's line,
/// and the first failure's cause and fix.
@Suite(.timeLimit(.minutes(1))) struct UpstreamCheckTests {
    /// The lines a check reported, as printed, and whether it succeeded.
    static func check(_ options: UpstreamCheck.Options) async -> (succeeded: Bool, lines: [String]) {
        let lines = Mutex<[String]>([])
        let succeeded = await UpstreamCheck(options).run(logger: Logger(label: "check")) { line in
            lines.withLock { $0.append(line.description) }
        }
        return (succeeded, lines.withLock { $0 })
    }

    static func withDemoServer(_ body: (String) async throws -> Void) async throws {
        let server = LocalDDPServer(configuration: DemoDataSet.configuration, logger: Logger(label: "upstream"))
        try await DemoDataSet.seed(server.core)
        try await server.start()
        let url = await server.url
        do {
            try await body(url)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test func everyStepSucceedsAgainstTheDemo() async throws {
        try await Self.withDemoServer { url in
            let (succeeded, lines) = await Self.check(
                UpstreamCheck.Options(url: url, username: "alice", password: "secret", publication: "tasks", params: [["listId": "inbox"]]))
            #expect(succeeded)
            #expect(lines.count == 3, "\(lines)")
            #expect(lines.first == "ok  connected to \(url) (DDP 1)")
            #expect(lines.dropFirst().first?.hasPrefix("ok  logged in as alice (user id ") == true, "\(lines)")
            #expect(lines.last == "ok  subscribed to tasks: 2 documents in 1 collection (tasks)", "\(lines)")
        }
    }

    @Test func aWrongPasswordFailsAtTheLoginWithTheAppsReason() async throws {
        try await Self.withDemoServer { url in
            let (succeeded, lines) = await Self.check(
                UpstreamCheck.Options(url: url, username: "alice", password: "wrong", publication: "tasks"))
            #expect(!succeeded)
            #expect(
                lines == [
                    "ok  connected to \(url) (DDP 1)",
                    "FAIL cannot log in as alice: Incorrect password [403]\n"
                        + "     fix: check --username and --password: the user must exist in the app, with this password"
                ])
        }
    }

    @Test func anUnknownPublicationFailsAtTheSubscription() async throws {
        try await Self.withDemoServer { url in
            let (succeeded, lines) = await Self.check(UpstreamCheck.Options(url: url, publication: "nosuch"))
            #expect(!succeeded)
            #expect(
                lines == [
                    "ok  connected to \(url) (DDP 1)",
                    "FAIL cannot subscribe to nosuch: Subscription 'nosuch' not found [404]\n"
                        + "     fix: no publication has this name: check Meteor.publish in the app"
                ])
        }
    }

    @Test func aClosedPortFailsAtTheConnectionNamingTheCause() async throws {
        let port = try await UpstreamCauseTests.closedPort()
        let url = "ws://127.0.0.1:\(port)/websocket"
        let (succeeded, lines) = await Self.check(UpstreamCheck.Options(url: url, username: "alice", password: "secret", timeout: .seconds(2)))
        #expect(!succeeded)
        #expect(
            lines == [
                "FAIL cannot connect to \(url): nothing is listening at 127.0.0.1:\(port) (connection refused)\n"
                    + "     fix: start the Meteor app, or correct the host and port of the upstream URL"
            ])
    }

    @Test func theAppsPageWhereDDPWasExpectedSaysToAddWebsocket() async throws {
        let page = FakeUpstream(handshake: .answer(status: 200, contentType: "text/html", body: "<html></html>"))
        try await page.start()
        let root = String(page.url.dropLast("/websocket".count))
        let (succeeded, lines) = await Self.check(UpstreamCheck.Options(url: root, timeout: .seconds(5)))
        await page.stop()
        #expect(!succeeded)
        #expect(lines.first?.contains("with HTTP 200 (text/html) instead of 101 Switching Protocols") == true, "\(lines)")
        #expect(lines.first?.hasSuffix("add /websocket to the upstream URL (Meteor serves DDP there): \(root)/websocket") == true, "\(lines)")
    }

    /// What a subscription brought is what was not in the view before it (the user's own
    /// document, published at login, is not counted).
    @Test func theDocumentsCountedAreThoseTheSubscriptionBrought() {
        var before = DocumentCache()
        _ = before.apply(.added(collection: "users", id: "u1", fields: ["username": "alice"]))
        var after = before
        _ = after.apply(.added(collection: "tasks", id: "t1", fields: [:]))
        _ = after.apply(.added(collection: "tasks", id: "t2", fields: [:]))
        _ = after.apply(.added(collection: "lists", id: "l1", fields: [:]))
        #expect(
            UpstreamCheck.loaded(from: before, to: after) == [
                UpstreamCheck.Loaded(name: "lists", documents: 1), UpstreamCheck.Loaded(name: "tasks", documents: 2)
            ])
    }
}
