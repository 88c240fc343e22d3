import DDP
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import Bridge

/// A stream that needs nothing waited for (a live public reader of a subscription that is ready,
/// a session stream without `subscribe=`) is opened on its connection's event loop, without the
/// request path (a task, the router, the hand-off back to the loop).
@Suite struct LoopOpeningTests {
    static let path = "/v1/public/events?subscribe=tasks&collections=tasks"
    static func request(_ extra: String = "") -> String {
        "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\(extra)\r\n"
    }

    /// Opened on the loop, a reader gets the router's answer: the same head, the same events, a
    /// `Last-Event-ID` resumed from the log, counted as a request and as a reader, and its place
    /// freed when it hangs up.
    @Test func aReaderOpenedOnTheLoopIsAnsweredAsTheRouterAnswers() async throws {
        try await PublicFanoutTests.run { h, port in
            // The first reader makes the subscription (its answer waits for it to be ready): the
            // router answers it. The second finds it ready.
            let routed = try await RawConnection.open(port: port)
            try await routed.send(Self.request())
            #expect(try await routed.waitUntilReceived("retry:", count: 1, within: .seconds(10)) == 1)
            let onLoop = try await RawConnection.open(port: port)
            try await onLoop.send(Self.request())
            #expect(try await onLoop.waitUntilReceived("retry:", count: 1, within: .seconds(10)) == 1)
            let routedHead = Self.head(await routed.received)
            #expect(
                routedHead.hasPrefix("HTTP/1.1 200 OK\r\n") && routedHead.contains("text/event-stream") && routedHead.contains("Date: …"),
                "\(routedHead)")
            let onLoopHead = Self.head(await onLoop.received)
            #expect(onLoopHead == routedHead, "the heads differ: \(onLoopHead) vs \(routedHead)")

            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            for id in ["q1", "q2"] {
                let inserted = try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"_id":"\#(id)","text":"x"}"#)
                #expect(inserted.status == .created, "\(inserted.text)")
            }
            for reader in [routed, onLoop] {
                #expect(try await reader.waitUntilReceived(#""q2""#, count: 1, within: .seconds(10)) == 1)
            }
            #expect(Self.documentEvents(await onLoop.received) == Self.documentEvents(await routed.received))
            try await h.metrics("both streams counted as requests and as readers") {
                $0.contains(#"ddp_bridge_http_requests_total{route="/v1/public/events",status="200"} 2"#)
                    && metricSample($0, "ddp_bridge_public_readers") == 2
            }

            // A resume the log holds starts on the loop too, from the event after the one given.
            let routedText = await routed.received
            let firstID = try #require(Self.eventID(of: #""q1""#, in: routedText), "no id on q1's event: \(routedText)")
            let resumed = try await RawConnection.open(port: port)
            try await resumed.send(Self.request("Last-Event-ID: \(firstID)\r\n"))
            #expect(try await resumed.waitUntilReceived(#""q2""#, count: 1, within: .seconds(10)) == 1)
            #expect(!(await resumed.received).contains(#""q1""#), "the resumed reader got the event it had")

            // Hanging up frees each place at once.
            try await onLoop.close()
            try await resumed.close()
            try await h.metrics("the loop's readers are gone", timeout: .seconds(5)) { metricSample($0, "ddp_bridge_public_readers") == 1 }
            try await routed.close()
            try await h.metrics("every reader is gone", timeout: .seconds(5)) { metricSample($0, "ddp_bridge_public_readers") == 0 }
        }
    }

    /// A session's stream that needs nothing waited for opens on the loop with the router's head
    /// and the session's events; it holds the session's stream place until it hangs up, and a
    /// session past its streams, or ended, gets the router's refusal.
    @Test func aSessionStreamOpenedOnTheLoopIsAnsweredAsTheRouterAnswers() async throws {
        try await BridgeHarness.run(configure: { $0.maxStreamsPerSession = 2 }) { h in
            let port = try #require(h.client.port)
            let (token, _) = try await h.session(#"{"username":"alice","password":"secret"}"#)
            func request(_ query: String) -> String {
                "GET /v1/events\(query) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
            }
            // With `subscribe=` the stream waits for its subscription: the router answers it.
            let routed = try await RawConnection.open(port: port)
            try await routed.send(request("?subscribe=tasks&collections=tasks"))
            #expect(try await routed.waitUntilReceived("event: ready", count: 1, within: .seconds(10)) == 1)
            let onLoop = try await RawConnection.open(port: port)
            try await onLoop.send(request("?collections=tasks"))
            #expect(try await onLoop.waitUntilReceived("retry:", count: 1, within: .seconds(10)) == 1)
            let routedHead = Self.head(await routed.received)
            let onLoopHead = Self.head(await onLoop.received)
            #expect(routedHead.hasPrefix("HTTP/1.1 200 OK\r\n") && routedHead.contains("Date: …"), "\(routedHead)")
            #expect(onLoopHead == routedHead, "the heads differ: \(onLoopHead) vs \(routedHead)")
            let inserted = try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"_id":"q1","text":"x"}"#)
            #expect(inserted.status == .created, "\(inserted.text)")
            for reader in [routed, onLoop] {
                #expect(try await reader.waitUntilReceived(#""q1""#, count: 1, within: .seconds(10)) == 1)
            }
            try await h.metrics("both streams counted") {
                $0.contains(#"ddp_bridge_http_requests_total{route="/v1/events",status="200"} 2"#) && metricSample($0, "ddp_bridge_sse_streams") == 2
            }
            // Past the session's two streams: 429 with the router's reason.
            let third = try await RawConnection.exchange(
                port: port, request("?collections=tasks").replacingOccurrences(of: "\r\n\r\n", with: "\r\nConnection: close\r\n\r\n"))
            #expect(third.text.contains("too-many-streams"), "\(third.text)")
            // Hanging up frees the place at once.
            try await onLoop.close()
            try await h.metrics("the loop's stream is gone", timeout: .seconds(5)) { metricSample($0, "ddp_bridge_sse_streams") == 1 }
            try await routed.close()
            // An ended session's token gets the router's 401.
            #expect(try await h.request(.delete, "/v1/session", token: token).status == .noContent)
            let ended = try await RawConnection.exchange(
                port: port, request("").replacingOccurrences(of: "\r\n\r\n", with: "\r\nConnection: close\r\n\r\n"))
            #expect(ended.text.hasPrefix("HTTP/1.1 401"), "\(ended.text)")
        }
    }

    /// What the router refuses is still refused with its reason when the subscription is ready:
    /// the loop opens only what the router would open.
    @Test func whatTheRouterRefusesIsRefusedWhenTheSubscriptionIsReady() async throws {
        try await PublicFanoutTests.run(configure: { $0.publicMaxReadersPerAddress = 1 }) { h, port in
            let first = try await RawConnection.open(port: port)
            try await first.send(Self.request())
            #expect(try await first.waitUntilReceived("retry:", count: 1, within: .seconds(10)) == 1)
            // Past this address's readers: 429 in the bridge's error shape.
            let second = try await RawConnection.exchange(port: port, Self.request("Connection: close\r\n"))
            #expect(second.text.hasPrefix("HTTP/1.1 429"), "\(second.text)")
            #expect(second.text.contains("too-many-public-streams"), "\(second.text)")
            try await first.close()
            try await h.metrics("the first reader is gone", timeout: .seconds(5)) { metricSample($0, "ddp_bridge_public_readers") == 0 }
            // A bad filter on a ready subscription: 400 with its reason, nothing counted.
            let keep = try await RawConnection.open(port: port)
            try await keep.send(Self.request())
            #expect(try await keep.waitUntilReceived("retry:", count: 1, within: .seconds(10)) == 1)
            try await keep.close()
            try await h.metrics("the place is free again", timeout: .seconds(5)) { metricSample($0, "ddp_bridge_public_readers") == 0 }
            let bad = try await RawConnection.exchange(
                port: port,
                "GET /v1/public/events?subscribe=tasks&collections=tasks,lists&id=x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(bad.text.hasPrefix("HTTP/1.1 400"), "\(bad.text)")
            #expect(bad.text.contains("id needs exactly one collection"), "\(bad.text)")
            #expect(metricSample(try await h.request(.get, "/metrics").text, "ddp_bridge_public_readers") == 0)
        }
    }

    /// A public reader of a ready subscription, and a stream of a session held here, open while
    /// every worker of the concurrency pool is busy: the loop answers them, no task is needed.
    /// Through the request path they waited for a worker.
    /// Heavy (it blocks the pool): run on its own by the test command.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["DDP_BRIDGE_HEAVY_TESTS"] != nil), arguments: ["public", "session"])
    func aStreamThatNeedsNothingWaitedForOpensWhileEveryConcurrencyWorkerIsBusy(_ kind: String) async throws {
        try await PublicFanoutTests.run { h, port in
            let routed = try await RawConnection.open(port: port)
            try await routed.send(Self.request())
            #expect(try await routed.waitUntilReceived("retry:", count: 1, within: .seconds(10)) == 1)
            let (token, _) = try await h.session()
            let request = kind == "public" ? Self.request() : "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
            let (arrivals, arrival) = AsyncStream<ContinuousClock.Instant>.makeStream()
            let sent = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
            let opened = NIOLockedValueBox<(any Channel)?>(nil)
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            // Sent by an event loop from 300 ms on: by then every worker is blocked below.
            loop.scheduleTask(in: .milliseconds(300)) {
                sent.withLockedValue { $0 = .now }
                _ = ClientBootstrap(group: loop)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(Marker("retry:") { arrival.yield(.now) })
                        }
                    }
                    .connect(host: "127.0.0.1", port: port)
                    .flatMap { channel in
                        opened.withLockedValue { $0 = channel }
                        return channel.writeAndFlush(ByteBuffer(string: request))
                    }
            }
            let freed = await blockEveryWorker(seconds: 1.5)
            let answered = await first(of: arrivals, within: .seconds(10))
            let firstFree = try #require(freed)
            let sentAt = try #require(sent.withLockedValue { $0 }, "the request was never sent")
            let answeredAt = try #require(answered, "the stream did not open within 10 s")
            #expect(sentAt < firstFree, "the request was sent only after a worker was free again")
            #expect(answeredAt < firstFree, "the stream opened only after a worker was free: \(answeredAt - sentAt) after its request")
            try await opened.withLockedValue { $0 }?.close()
            try await routed.close()
            try await h.metrics("every stream is gone", timeout: .seconds(5)) {
                metricSample($0, "ddp_bridge_public_readers") == 0 && metricSample($0, "ddp_bridge_sse_streams") == 0
            }
        }
    }

    /// The response head, up to the blank line, with its `Date` header's value left out (the
    /// two answers may be a second apart).
    static func head(_ text: String) -> String {
        let head = text.range(of: "\r\n\r\n").map { String(text[..<$0.lowerBound]) } ?? text
        return head.components(separatedBy: "\r\n").map { $0.hasPrefix("Date: ") ? "Date: …" : $0 }.joined(separator: "\r\n")
    }

    /// The `data:` lines of the events of the documents the test writes, in order (the routed
    /// reader also got the publication's documents as it subscribed; ids are each stream's own).
    static func documentEvents(_ text: String) -> [String] {
        text.split(whereSeparator: \.isNewline).filter { $0.hasPrefix("data: ") && ($0.contains(#""q1""#) || $0.contains(#""q2""#)) }.map(String.init)
    }

    /// The `id:` of the first event whose lines contain `marker`.
    static func eventID(of marker: String, in text: String) -> String? {
        for block in text.components(separatedBy: "\n\n") where block.contains(marker) {
            for line in block.split(whereSeparator: \.isNewline) where line.hasPrefix("id: ") { return String(line.dropFirst(4)) }
        }
        return nil
    }
}

/// Calls `seen` once, when what a connection has received contains `marker`.
private final class Marker: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var text = ""
    private var told = false
    private let marker: String
    private let seen: @Sendable () -> Void

    init(_ marker: String, seen: @escaping @Sendable () -> Void) {
        self.marker = marker
        self.seen = seen
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        text += String(buffer: unwrapInboundIn(data))
        if !told, text.contains(marker) {
            told = true
            seen()
        }
    }
}

/// The `Date` header sent from the event loops, in RFC 9110's IMF-fixdate.
@Suite struct HTTPDateTests {
    @Test func secondsAreWrittenAsIMFFixdate() {
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(1_795_615_703) == "Wed, 25 Nov 2026 14:08:23 GMT")
        #expect(HTTPDate.format(951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        // The latest a clock set far ahead is clamped to: still four digits of year.
        #expect(HTTPDate.format(HTTPDate.lastSecond) == "Fri, 31 Dec 9999 23:59:59 GMT")
    }
}
