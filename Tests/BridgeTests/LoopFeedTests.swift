import DDP
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Testing

@testable import Bridge

/// A loop's feed (``LoopFeed``) on one `EmbeddedEventLoop` with real writers: what each stream
/// gets of the entries posted, in which order, and that a turn's chunk is one buffer for all.
@Suite struct LoopFeedTests {
    /// A stream written by a GET's writer on its own channel of `loop`, joined to `feed` as the
    /// session joins it (with its start, if any).
    final class Reader {
        let channel: EmbeddedChannel
        let stream: EventStream

        convenience init(_ feed: LoopFeed, loop: EmbeddedEventLoop, filter: StreamFilter = StreamFilter()) throws {
            try self.init(feed, stream: EventStream(filter: filter, limit: 1 << 20, loop: loop), loop: loop)
        }

        /// `stream` joined to `feed`, if any, and taken over by its writer.
        init(_ feed: LoopFeed? = nil, stream: EventStream, loop: EmbeddedEventLoop, starting prelude: StreamPrelude? = nil) throws {
            channel = EmbeddedChannel(handlers: [HTTPResponseEncoder(), HTTP1ToHTTPServerCodec(secure: false)], loop: loop)
            self.stream = stream
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
            try channel.pipeline.syncOperations.addHandler(FrontDoor(.inert))
            if let feed { feed.post(.join(stream, prelude)) }
            let head = HTTPResponse(status: .ok, headerFields: [.contentType: "text/event-stream"])
            #expect(StreamHandOff.install(stream, on: channel, opening: (head, ByteBuffer(string: "retry: 1\n\n"))))
            _ = try wire()
        }

        /// The buffers written since the last call, as they reached the socket.
        func buffers() throws -> [ByteBuffer] {
            var buffers: [ByteBuffer] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { buffers.append(buffer) }
            return buffers
        }

        /// The bytes written since the last call.
        func wire() throws -> String { try buffers().map { String(buffer: $0) }.joined() }

        deinit { _ = try? channel.finish(acceptAlreadyClosed: true) }
    }

    static func event(_ id: UInt64, _ collection: String = "tasks", _ document: String = "a") -> SessionEvent {
        .document(.added(collection: collection, id: document, fields: ["n": .int(Int(id))]), document: ["n": .int(Int(id))], id: id)
    }

    /// A chunk on the wire: its size in hex, CRLF, the frames, CRLF.
    static func chunk(_ events: [SessionEvent]) -> String {
        let text = events.map { String(buffer: $0.frame) }.joined()
        return String(text.utf8.count, radix: 16) + "\r\n" + text + "\r\n"
    }

    @Test func whatQueuesBeforeATurnGoesOutAsOneChunkToEveryReaderInOrder() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let readers = try (0..<3).map { _ in try Reader(feed, loop: loop) }
        let events = (1...4).map { Self.event($0) }
        feed.post(.events(Array(events[0..<2])))
        feed.post(.events(Array(events[2...])))
        #expect(try readers[0].wire().isEmpty, "written before the loop's turn")
        loop.run()
        for reader in readers { #expect(try reader.wire() == Self.chunk(events)) }
    }

    /// The chunk of a turn is made once: every reader of the loop writes the same buffer.
    @Test func everyReaderOfALoopWritesTheSameChunkBuffer() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let readers = try (0..<3).map { _ in try Reader(feed, loop: loop) }
        feed.post(.events([Self.event(1), Self.event(2)]))
        loop.run()
        let address = { (buffer: ByteBuffer) in buffer.withUnsafeReadableBytes { Int(bitPattern: $0.baseAddress) } }
        let written = try readers.map { try #require($0.buffers().first) }
        #expect(Set(written.map(address)).count == 1, "each reader had a copy of its own")
        #expect(String(buffer: written[0]) == Self.chunk([Self.event(1), Self.event(2)]))
    }

    /// A turn joins runs of small frames into one buffer and keeps a large frame as the shared
    /// frame itself; its framing is made once, by the first sink that asks, for all of them.
    @Test func aTurnJoinsSmallFramesKeepsLargeOnesAndIsFramedOnce() throws {
        let text: EJSON = .string(String(repeating: "x", count: LoopFeed.Turn.joinLimit + 1))
        let large = SessionEvent.document(.added(collection: "tasks", id: "big", fields: ["text": text]), document: ["text": text], id: 3)
        let events = [Self.event(1), Self.event(2), large, Self.event(4)]
        let turn = LoopFeed.Turn([LoopFeed.Entry(number: 1, content: .events(events))], filter: StreamFilter(), after: 0)
        #expect(turn.count == 4)
        #expect(turn.frames.count == 3, "two small frames joined, the large one, the last small one")
        let address = { (buffer: ByteBuffer) in buffer.withUnsafeReadableBytes { Int(bitPattern: $0.baseAddress) } }
        #expect(address(turn.frames[1]) == address(large.frame), "the large frame is not copied")
        #expect(turn.bytes == events.reduce(0) { $0 + $1.frame.readableBytes })
        var made = 0
        let frame: ([ByteBuffer], Int) -> [ByteBuffer] = { frames, _ in
            made += 1
            return frames.reversed()
        }
        let first = turn.framed(by: frame)
        let second = turn.framed(by: frame)
        #expect(made == 1)
        #expect(first.map(address) == second.map(address))
    }

    /// A live query's reader on a feed gets each change as the query sees it: a document that
    /// enters is `added`, one that changes inside is itself, one that leaves is `removed`, one
    /// outside is nothing; beside it, a reader of the whole collection gets every change as is.
    @Test func aLiveQuerysReaderOnAFeedGetsWhatEntersAndLeavesItsView() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let query = try Reader(feed, loop: loop, filter: LoopFeedPlacementTests.openTasks)
        let all = try Reader(feed, loop: loop, filter: StreamFilter(collections: ["tasks"]))
        let open: EJSONObject = ["done": false]
        let closed: EJSONObject = ["done": true]
        let events = [
            SessionEvent.document(.added(collection: "tasks", id: "a", fields: open), document: open, id: 1),
            SessionEvent.document(.added(collection: "tasks", id: "b", fields: closed), document: closed, id: 2),
            SessionEvent.document(
                .changed(collection: "tasks", id: "a", fields: ["n": 1], cleared: [], previous: [:]), document: ["done": false, "n": 1], id: 3),
            SessionEvent.document(
                .changed(collection: "tasks", id: "a", fields: closed, cleared: [], previous: open), document: ["done": true, "n": 1], id: 4)
        ]
        feed.post(.events(events))
        loop.run()
        let seen = try query.wire()
        #expect(seen.contains("event: added") && seen.contains("\"a\""), "\(seen)")
        #expect(!seen.contains("\"b\""), "a document outside the query reached its reader: \(seen)")
        #expect(seen.contains("event: changed"), "\(seen)")
        #expect(seen.contains("event: removed"), "a document that left the query was not removed: \(seen)")
        #expect(try all.wire() == Self.chunk(events))
    }

    /// A stream that joins while the feed still holds an entry takes only what is posted after its
    /// join (what came before is in its start): nothing missed, nothing doubled.
    @Test func aReaderThatJoinsTakesOnlyTheEntriesPostedAfterIt() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let early = try Reader(feed, loop: loop)
        feed.post(.events([Self.event(1)]))
        let late = try Reader(feed, loop: loop)
        feed.post(.events([Self.event(2)]))
        loop.run()
        #expect(try early.wire() == Self.chunk([Self.event(1), Self.event(2)]))
        #expect(try late.wire() == Self.chunk([Self.event(2)]))
        #expect(feed.memberCount == 2)
    }

    @Test func eachReaderGetsWhatItsFilterAdmits() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let all = try Reader(feed, loop: loop)
        let tasks = try Reader(feed, loop: loop, filter: StreamFilter(collections: ["tasks"]))
        let one = try Reader(feed, loop: loop, filter: StreamFilter(collections: ["notes"], documentID: "b"))
        let events = [Self.event(1, "tasks", "a"), Self.event(2, "notes", "a"), Self.event(3, "notes", "b")]
        feed.post(.events(events))
        loop.run()
        #expect(try all.wire() == Self.chunk(events))
        #expect(try tasks.wire() == Self.chunk([events[0]]))
        #expect(try one.wire() == Self.chunk([events[2]]))
    }

    /// The session's last frame follows the events posted before it, then the response ends and
    /// the connection closes.
    @Test func theLastFrameFollowsTheEventsPostedBeforeIt() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let reader = try Reader(feed, loop: loop)
        feed.post(.events([Self.event(1)]))
        feed.post(.finish(Array("event: end\ndata: {}\n\n".utf8)))
        loop.run()
        let wire = try reader.wire()
        let end = try #require(wire.range(of: "event: end"))
        let first = try #require(wire.range(of: "id: 1\n"), "\(wire)")
        #expect(first.upperBound < end.lowerBound, "the last frame came before an event posted ahead of it: \(wire)")
        #expect(wire.hasSuffix("0\r\n\r\n"), "the response was not ended: \(wire)")
        #expect(!reader.channel.isActive, "the connection stayed open")
    }

    /// A reader whose start (a replay) is still being written gets the feed's bytes after it,
    /// even when the feed's turn comes before the writer's first.
    @Test func aReaderWithAStartStillToWriteGetsTheFeedsBytesAfterIt() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let stream = EventStream(filter: StreamFilter(), limit: 1 << 20, loop: loop)
        let replayed = Self.event(1)
        let reader = try Reader(
            feed, stream: stream, loop: loop, starting: StreamPrelude(head: [], replay: .init(after: 0, through: 1) { _, _, _ in [replayed] }))
        feed.post(.events([Self.event(2)]))
        feed.run()
        loop.advanceTime(by: .milliseconds(1))
        #expect(try reader.wire() == Self.chunk([replayed]) + Self.chunk([Self.event(2)]))
    }

    @Test func aRemovedReaderGetsNothingMore() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let kept = try Reader(feed, loop: loop)
        let removed = try Reader(feed, loop: loop)
        feed.post(.leave(ObjectIdentifier(removed.stream)))
        feed.post(.events([Self.event(1)]))
        loop.run()
        #expect(try kept.wire() == Self.chunk([Self.event(1)]))
        #expect(try removed.wire().isEmpty)
        #expect(feed.memberCount == 1)
    }

    /// A stream whose connection closes before the loop took its join leaves nothing behind: the
    /// leave follows the join in the feed's order, whatever the loop's turns.
    @Test func aReaderThatLeavesBeforeItsJoinIsTakenIsNotKept() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let stream = EventStream(filter: StreamFilter(), limit: 1 << 20, loop: loop)
        feed.post(.join(stream, nil))
        feed.post(.leave(ObjectIdentifier(stream)))
        feed.post(.events([Self.event(1)]))
        loop.run()
        #expect(feed.memberCount == 0)
        #expect(stream.writer == nil)
    }

    /// The session's heartbeat reaches every stream of the loop, live queries too, in its place
    /// among the events.
    @Test func theHeartbeatReachesEveryStreamInItsPlace() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let all = try Reader(feed, loop: loop, filter: StreamFilter(collections: ["notes"]))
        let query = try Reader(feed, loop: loop, filter: LoopFeedPlacementTests.openTasks)
        feed.post(.events([Self.event(1)]))
        feed.post(.heartbeat)
        loop.run()
        #expect(
            try all.wire() == String(SSEFrame.heartbeatBuffer.readableBytes, radix: 16) + "\r\n" + String(buffer: SSEFrame.heartbeatBuffer) + "\r\n")
        let seen = try query.wire()
        #expect(seen.contains(String(buffer: SSEFrame.heartbeatBuffer)), "\(seen)")
    }

    /// A reader whose socket takes nothing keeps the turn's bytes in its own bounded buffer and
    /// gets them, after what it already had, when the socket drains; the others are not held up.
    @Test func aReaderThatIsNotWritableCatchesUpWhenItsSocketDrains() throws {
        let loop = EmbeddedEventLoop()
        let feed = LoopFeed(loop: loop)
        let fast = try Reader(feed, loop: loop)
        let slow = try Reader(feed, loop: loop)
        slow.channel.isWritable = false
        feed.post(.events([Self.event(1)]))
        loop.run()
        feed.post(.events([Self.event(2)]))
        loop.run()
        #expect(try fast.wire() == Self.chunk([Self.event(1)]) + Self.chunk([Self.event(2)]))
        #expect(try slow.wire().isEmpty)
        slow.channel.isWritable = true
        slow.channel.pipeline.fireChannelWritabilityChanged()
        #expect(try slow.wire() == Self.chunk([Self.event(1), Self.event(2)]))
    }
}

/// Where a session puts its streams: every stream joins its loop's feed as it is registered,
/// whoever's session it is, live queries too; a loop with no stream left loses its feed.
@Suite struct LoopFeedPlacementTests {
    static func session(_ owner: Session.Owner, loop: EmbeddedEventLoop) -> Session {
        let configuration = BridgeConfiguration(upstream: "ws://127.0.0.1:9/websocket")
        return Session(
            owner: owner, settings: configuration.sessionSettings, limits: configuration.userSessionLimits,
            runtime: BridgeRuntime(eventLoopGroup: loop), logger: Logger(label: "test"), metrics: BridgeMetrics(),
            budget: MemoryBudget(configuration.memoryBudgetSettings))
    }

    static func counts(_ session: Session) -> (feeds: Int, streams: Int) {
        session.state.withLock { state in (state.feeds.count, state.streams.count) }
    }

    @Test func aPublicReaderJoinsItsLoopsFeedAndTheLastOneTakesItAway() throws {
        let loop = EmbeddedEventLoop()
        let session = Self.session(.publicPool, loop: loop)
        let streams = (0..<2).map { _ in EventStream(filter: StreamFilter(collections: ["tasks"]), limit: 1 << 20, loop: loop) }
        var readers: [LoopFeedTests.Reader] = []
        for stream in streams {
            #expect(session.attachFromLog(stream, start: .live))
            readers.append(try LoopFeedTests.Reader(stream: stream, loop: loop))
        }
        #expect(Self.counts(session) == (1, 2))
        let feed = try #require(session.state.withLock { $0.feeds.values.first?.feed })
        loop.run()
        #expect(feed.memberCount == 2)
        session.detach(streams[0])
        #expect(Self.counts(session) == (1, 1))
        session.detach(streams[1])
        #expect(Self.counts(session) == (0, 0))
        loop.run()
        #expect(feed.memberCount == 0)
        withExtendedLifetime(readers) {}
    }

    /// A user session's streams are delivered as a public reader's are, a live query's too: one
    /// delivery path.
    @Test func aUserSessionsStreamsJoinTheFeedLiveQueriesToo() throws {
        let loop = EmbeddedEventLoop()
        let user = Session.UserIdentity(
            tokenHash: "t", address: "127.0.0.1", key: ClientKey(address: "127.0.0.1", ipv6Prefix: 64), meteorKey: nil, persistent: false)
        let session = Self.session(.user(user), loop: loop)
        let stream = EventStream(filter: StreamFilter(), limit: 1 << 20, loop: loop)
        #expect(session.attachFromLog(stream, start: .live))
        let reader = try LoopFeedTests.Reader(stream: stream, loop: loop)
        #expect(Self.counts(session) == (1, 1))
        let query = EventStream(filter: Self.openTasks, limit: 1 << 20, loop: loop)
        session.state.withLock { state in
            #expect((try? state.machine.admitStream(limit: 10)) != nil)
            session.register(query, starting: nil, in: &state)
        }
        let queryReader = try LoopFeedTests.Reader(stream: query, loop: loop)
        #expect(Self.counts(session) == (1, 2))
        loop.run()
        #expect(session.state.withLock { $0.feeds.values.first?.feed.memberCount } == 2)
        withExtendedLifetime((reader, queryReader)) {}
    }

    /// `tasks` whose `done` is false: a live query.
    static var openTasks: StreamFilter {
        var filter = StreamFilter(collections: ["tasks"])
        filter.selector = try? Selector(["done": false])
        return filter
    }

    /// Around the writer: a batch delivered before the writer took its connection (kept in the
    /// stream's buffer by the feed's turn) and one after reach the reader once each, in order,
    /// and a later stream of the same loop joins the same feed and takes what follows its join.
    @Test func batchesBeforeAndAfterTheWriterReachTheReaderOnceEachInOrder() throws {
        let loop = EmbeddedEventLoop()
        let session = Self.session(.publicPool, loop: loop)
        let deliver = { (events: [SessionEvent]) in session.state.withLock { Session.deliver(events, in: $0) } }
        let stream = EventStream(filter: StreamFilter(collections: ["tasks"]), limit: 1 << 20, loop: loop)
        #expect(session.attachFromLog(stream, start: .live))
        let events = (1...4).map { LoopFeedTests.event($0) }
        deliver([events[0]])
        loop.run()
        #expect(stream.writer == nil)
        let reader = try LoopFeedTests.Reader(stream: stream, loop: loop)
        deliver([events[1]])
        loop.run()
        #expect(try reader.wire() == LoopFeedTests.chunk([events[0]]) + LoopFeedTests.chunk([events[1]]))
        // A second stream joins the same feed and takes what is posted after its join.
        let second = EventStream(filter: StreamFilter(collections: ["tasks"]), limit: 1 << 20, loop: loop)
        #expect(session.attachFromLog(second, start: .live))
        deliver([events[2]])
        let secondReader = try LoopFeedTests.Reader(stream: second, loop: loop)
        deliver([events[3]])
        loop.run()
        #expect(try reader.wire() == LoopFeedTests.chunk([events[2], events[3]]))
        #expect(try secondReader.wire() == LoopFeedTests.chunk([events[2], events[3]]))
        #expect(Self.counts(session) == (1, 2))
    }
}
