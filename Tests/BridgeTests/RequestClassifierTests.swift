import Testing

@testable import Bridge

/// The front door's one decision per request head, pure: heads in, decisions out.
@Suite struct RequestClassifierTests {
    static func head(
        _ target: String, method: String = "GET", length: String? = nil, chunked: Bool = false, origin: Bool = false,
        upgrade: Bool = false, connection: [String] = []
    ) -> RequestHead {
        RequestHead(
            method: method, target: target, contentLength: length, hasTransferEncoding: chunked, hasOrigin: origin, hasUpgrade: upgrade,
            connection: connection)
    }

    static let long = "/v1/events?collections=" + String(repeating: "a", count: 64 * 1024)

    static let table: [(String, RequestHead, RequestDecision)] = [
        ("liveness", head("/healthz"), .probe(.health)),
        ("readiness", head("/readyz"), .probe(.readiness)),
        ("a probe with an empty body", head("/healthz", length: "0"), .probe(.health)),
        ("a probe that asks to close", head("/healthz", connection: ["keep-alive, Close"]), .probe(.health)),
        ("a probe path with a query", head("/healthz?x=1"), .router(closes: false)),
        ("HEAD of a probe", head("/healthz", method: "HEAD"), .router(closes: false)),
        ("a probe with Origin", head("/healthz", origin: true), .router(closes: false)),
        ("a probe with a body", head("/healthz", length: "2"), .router(closes: false)),
        ("a chunked probe", head("/healthz", chunked: true), .router(closes: false)),
        ("a probe asking for an upgrade", head("/healthz", upgrade: true, connection: ["Upgrade"]), .router(closes: true)),
        ("a session stream", head("/v1/events?collections=tasks"), .stream(.session)),
        ("a session stream without a query", head("/v1/events"), .stream(.session)),
        ("a public stream", head("/v1/public/events?subscribe=tasks"), .stream(.public)),
        ("a stream that asks to close", head("/v1/events", connection: ["close"]), .router(closes: true)),
        ("a stream with Origin", head("/v1/events", origin: true), .router(closes: false)),
        ("a stream path with a trailing slash", head("/v1/events/"), .router(closes: false)),
        ("a stream with an undecodable parameter", head("/v1/events?x=%ZZ"), .refuse(.undecodable(parameter: "x"), .session)),
        ("a stream with a long target", head(long), .refuse(.tooLong(length: long.utf8.count), .session)),
        ("a write", head("/v1/methods/echo", method: "POST", length: "2"), .router(closes: false)),
        ("a write that asks to close", head("/v1/sessions", method: "POST", connection: ["close"]), .router(closes: true)),
        ("close in another token", head("/v1/session", connection: ["closed, keep-alive"]), .router(closes: false)),
        ("close in any case, spaced", head("/v1/session", connection: [" CLOSE\t"]), .router(closes: true))
    ]

    @Test func eachHeadIsDecidedOnce() {
        for (name, head, decision) in Self.table {
            #expect(RequestClassifier.classify(head) == decision, "\(name)")
        }
    }

    /// The target's problems are the same for every door (the router's hygiene asks here too).
    @Test func aTargetsProblemsAreItsTextAlone() {
        #expect(RequestClassifier.problem("/v1/collections/tasks?selector=%7B%7D") == nil)
        #expect(RequestClassifier.problem("/v1/collections/tasks?%FF=1") == .undecodable(parameter: "%FF"))
        #expect(RequestClassifier.problem(Self.long) == .tooLong(length: Self.long.utf8.count))
        #expect(RequestClassifier.problem("/" + String(repeating: "a", count: 64 * 1024 - 1)) == nil, "64 KiB is taken")
    }

    /// A verb the router knows is routed as it was sent; any other as TRACE, which no path takes.
    @Test func aVerbTheRouterKnowsOnNoPathIsRoutedAsTrace() {
        for verb in RequestClassifier.routerVerbs { #expect(RequestClassifier.routedVerb(for: verb) == nil, "\(verb)") }
        for verb in ["QUERY", "PROPFIND", "get", "BREW", "X"] { #expect(RequestClassifier.routedVerb(for: verb) == "TRACE", "\(verb)") }
    }
}
