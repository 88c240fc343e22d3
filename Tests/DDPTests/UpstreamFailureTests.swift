import DDP
import Testing

/// What each cause of an upstream failure says and suggests, without a socket.
@Suite struct UpstreamFailureTests {
    static let wrongPath = "ws://127.0.0.1:3000"
    static let right = "ws://127.0.0.1:3000/websocket"

    @Test func aRefusedPortNamesTheAddressAndSaysToStartTheApp() {
        let failure = UpstreamFailure(.connectionRefused(endpoint: "127.0.0.1:3999"), url: "ws://127.0.0.1:3999/websocket")
        #expect(failure.code == .connectionRefused)
        #expect(failure.code.description == "connection-refused")
        #expect(failure.message == "nothing is listening at 127.0.0.1:3999 (connection refused)")
        #expect(failure.hint == "start the Meteor app, or correct the host and port of the upstream URL")
        #expect(failure.httpStatus == nil)
    }

    @Test func anUpgradeAnsweredWithTheAppsPageSaysToAddWebsocket() {
        let failure = UpstreamFailure(.upgradeRefused(status: 200, contentType: "text/html; charset=utf-8"), url: Self.wrongPath)
        #expect(failure.code == .upgradeRefused)
        #expect(failure.httpStatus == 200)
        #expect(
            failure.message == "the upstream answered the WebSocket upgrade for / with HTTP 200 (text/html) instead of 101 Switching Protocols")
        #expect(failure.hint == "that is a web page, not DDP; add /websocket to the upstream URL (Meteor serves DDP there): \(Self.right)")
    }

    @Test func anUpgradeRefusedOnTheRightPathSaysWhatTheStatusSuggests() {
        func hint(_ status: Int, _ type: String? = nil) -> String? {
            UpstreamFailure(.upgradeRefused(status: status, contentType: type), url: Self.right).hint
        }
        #expect(hint(404)?.hasPrefix("nothing serves this path here") == true)
        #expect(hint(301)?.contains("wss://") == true)
        #expect(hint(403)?.contains("refuses the bridge") == true)
        #expect(hint(502)?.contains("see its logs") == true)
        #expect(hint(200, "text/html")?.contains("a web page") == true)
        #expect(hint(200, "text/html")?.contains("add /websocket") == false, "the path is already /websocket")
        let plain = UpstreamFailure(.upgradeRefused(status: 400, contentType: nil), url: Self.right)
        #expect(plain.message == "the upstream answered the WebSocket upgrade for /websocket with HTTP 400 instead of 101 Switching Protocols")
    }

    @Test func anUpgradeWithNoAnswerOrClosedOnTheWrongPathSaysToAddWebsocket() {
        let silent = UpstreamFailure(.timedOut(.upgrade, after: .seconds(15)), url: Self.wrongPath)
        #expect(silent.code == .timedOut)
        #expect(silent.message == "the WebSocket upgrade request for / got no answer within 15 s")
        #expect(silent.hint?.contains(Self.right) == true)
        let closed = UpstreamFailure(.closed(.upgrade), url: Self.wrongPath)
        #expect(closed.code == .connectionClosed)
        #expect(closed.hint?.contains(Self.right) == true)
        // On /websocket already, the hint asks whether this is the app at all.
        #expect(UpstreamFailure(.timedOut(.upgrade, after: .seconds(15)), url: Self.right).hint?.contains("is it the Meteor app") == true)
    }

    @Test func eachStageOfATimeoutSaysWhatDidNotFinish() {
        func message(_ stage: UpstreamFailure.Stage) -> String {
            UpstreamFailure(.timedOut(stage, after: .milliseconds(300))).message
        }
        #expect(message(.tcp) == "the TCP connection was not accepted within 0.3 s")
        #expect(message(.tls) == "the TLS handshake did not finish within 0.3 s")
        #expect(message(.upgrade) == "the WebSocket upgrade request got no answer within 0.3 s")
        #expect(message(.handshake) == "the upstream did not answer the DDP handshake within 0.3 s")
        #expect(message(.open) == "the upstream did not answer a ping within 0.3 s")
    }

    @Test func aTLSFailureNamesTheLibrarysReasonAndTheFix() {
        let unverified = UpstreamFailure(.tlsFailed("certificate verify failed"), url: "wss://app.example/websocket")
        #expect(unverified.code == .tlsFailed)
        #expect(unverified.message == "the TLS handshake failed: certificate verify failed")
        #expect(unverified.hint?.contains("--upstream-ca-file") == true)
        #expect(UpstreamFailure(.tlsFailed("wrong version number")).hint?.contains("use ws://") == true)
    }

    @Test func aDDPFailedNamesBothSidesVersions() {
        let failure = UpstreamFailure(.versionRefused(offered: "99", ours: ["1", "pre2", "pre1"]))
        #expect(failure.code == .ddpVersionRefused)
        #expect(failure.message == "the upstream supports no DDP version we speak (it offered '99'; the bridge speaks 1, pre2, pre1)")
        let long = String(repeating: "x", count: 100)
        #expect(UpstreamFailure(.versionRefused(offered: long, ours: ["1"])).message.contains(String(repeating: "x", count: 32) + "…'"))
    }

    @Test func everyCauseHasACodeAndAMessage() {
        let causes: [UpstreamFailure.Cause] = [
            .connectionRefused(endpoint: "h:1"), .nameNotResolved(host: "h"), .hostUnreachable(endpoint: "h:1", detail: "no route to host"),
            .timedOut(.tcp, after: .seconds(1)), .tlsFailed("x"), .upgradeRefused(status: 500, contentType: nil), .upgradeInvalid("x"),
            .versionRefused(offered: "9", ours: ["1"]), .versionRefusedItself("1"), .versionUnstable(offered: "pre1"),
            .messageTooLarge(limit: 1024), .protocolViolation("x"), .closed(.open), .invalidURL, .other("x")
        ]
        let codes = Set(causes.map { UpstreamFailure($0, url: Self.right).code })
        #expect(codes == Set(UpstreamFailure.Code.all), "every code is reachable from a cause")
        for cause in causes {
            let failure = UpstreamFailure(cause, url: Self.right)
            #expect(!failure.message.isEmpty)
            #expect(failure.description.hasPrefix(failure.message))
        }
        #expect(UpstreamFailure(.nameNotResolved(host: "meteor.internal")).message == "the host name 'meteor.internal' does not resolve")
    }

    @Test(arguments: [
        ("ws://127.0.0.1:3000", "ws://127.0.0.1:3000/websocket"),
        ("ws://127.0.0.1:3000/", "ws://127.0.0.1:3000/websocket"),
        ("wss://app.example/prefix/", "wss://app.example/prefix/websocket"),
        ("ws://h:3000/app?x=1", "ws://h:3000/app/websocket?x=1"),
        ("ws://[::1]:3000", "ws://[::1]:3000/websocket")
    ])
    func theWebsocketPathIsSuggestedWhereItIsMissing(url: String, suggested: String) {
        #expect(UpstreamFailure.websocketURL(suggestedFor: url) == suggested)
    }

    @Test(arguments: ["ws://h:3000/websocket", "ws://h:3000/websocket/", "wss://h/prefix/websocket?x=1", "not a url"])
    func noPathIsSuggestedWhereItIsThere(url: String) {
        #expect(UpstreamFailure.websocketURL(suggestedFor: url) == nil)
    }
}
