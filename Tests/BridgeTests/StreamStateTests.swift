import DDP
import NIOCore
import NIOEmbedded
import Testing

@testable import Bridge

/// An event stream's machine (``StreamState``), without sockets or locks: its bound, when its
/// writer is due, what a feed's turn does, and what a live query makes of each change.
@Suite struct StreamStateTests {
    /// A sink that does nothing: the machine only stores and returns its waker.
    final class Sink: StreamSink {
        func drain() {}
        func feed(_ stream: EventStream, _ turn: LoopFeed.Turn) {}
    }

    static func waker(_ loop: EmbeddedEventLoop) -> StreamWaker {
        StreamWaker(loop: loop, writer: NIOLoopBound(Sink() as any StreamSink, eventLoop: loop))
    }

    static func frame(_ size: Int) -> ByteBuffer { ByteBuffer(repeating: 0x61, count: size) }

    @Test func aRingBeforeTheWriterIsKnownIsGivenToItWhenItIs() {
        let loop = EmbeddedEventLoop()
        var state = StreamState(limit: 100)
        let got1 = state.append(Self.frame(10))
        #expect(got1 == nil, "no writer yet: nothing to ring")
        let got2 = state.setWaker(Self.waker(loop))
        #expect(got2, "the ring that came before it is due now")
        let got3 = state.setWaker(Self.waker(loop))
        #expect(!got3, "and only once")
    }

    @Test func theWriterIsDueForAnEmptyBufferOnly() {
        let loop = EmbeddedEventLoop()
        var state = StreamState(limit: 100)
        _ = state.setWaker(Self.waker(loop))
        let got4 = state.append(Self.frame(10))
        #expect(got4 != nil, "the buffer was empty")
        let got5 = state.append(Self.frame(10))
        #expect(got5 == nil, "a ring is pending already")
        let taken = state.takeBuffered()
        #expect(taken.first?.readableBytes == 10 && taken.more.count == 1 && taken.count == 2 && taken.ending == nil)
        let got6 = state.append(Self.frame(10))
        #expect(got6 != nil, "empty again after the writer took it")
    }

    @Test func pastTheLimitTheBacklogIsDroppedAndTheStreamEndsAsASlowConsumer() {
        let loop = EmbeddedEventLoop()
        var state = StreamState(limit: 100)
        _ = state.setWaker(Self.waker(loop))
        _ = state.append(Self.frame(60))
        let got7 = state.append(Self.frame(60))
        #expect(got7 != nil, "cut: the writer must write the last frame")
        #expect(state.hasEnded)
        let got8 = state.append(Self.frame(1))
        #expect(got8 == nil, "nothing is added after the end")
        let taken = state.takeBuffered()
        #expect(taken.first == nil && taken.count == 0, "the backlog was dropped")
        #expect(taken.dropped == 3, "two dropped at the cut, one after it")
        #expect(taken.ending.map { String(decoding: $0, as: UTF8.self).contains("slow-consumer") } == true)
    }

    @Test func aTurnIsWrittenAtOnceOnlyWhenNothingWaitsBeforeIt() {
        let loop = EmbeddedEventLoop()
        var state = StreamState(limit: 100)
        let frames = [Self.frame(10), Self.frame(10)]
        let got9 = state.offer(frames, bytes: 20, count: 2, writable: true)
        #expect(got9 == .wait, "no writer yet: kept")
        _ = state.setWaker(Self.waker(loop))
        _ = state.takeBuffered()
        let got10 = state.offer(frames, bytes: 20, count: 2, writable: true)
        #expect(got10 == .write)
        let got11 = state.offer(frames, bytes: 20, count: 2, writable: false)
        #expect(got11 == .wake, "a socket that takes nothing: kept, writer due")
        let got12 = state.offer(frames, bytes: 20, count: 2, writable: true)
        #expect(got12 == .wait, "behind a backlog: kept behind it")
        let got13 = state.takeBuffered()
        #expect(got13.count == 4)
        let got14 = state.offer([Self.frame(101)], bytes: 101, count: 1, writable: true)
        #expect(got14 == .wake, "past the limit: cut, not written")
        #expect(state.hasEnded)
    }

    /// A live query's held events are bounded as live frames are, and go through it in order.
    @Test func aLiveQueryHoldsItsEventsWithinTheLimitWhileItsFirstMatchRuns() {
        let loop = EmbeddedEventLoop()
        var state = StreamState(limit: 200)
        _ = state.setWaker(Self.waker(loop))
        let event = SessionEvent.document(.added(collection: "tasks", id: "a", fields: ["n": 1]), document: ["n": 1], id: 1)
        let got15 = state.hold(event)
        #expect(got15 == nil, "not holding: the event goes through the query now")
        state.prelude = nil
        let got16 = state.start(with: StreamPrelude(head: []), holdsLive: true)
        #expect(got16 != nil)
        #expect(state.isStarting)
        let got17 = state.hold(event)
        #expect(got17.map { $0 == nil } == true, "held, within the limit")
        let got18 = state.takeHeld(matching: ["a"])
        #expect(got18?.count == 1)
        let got19 = state.takeHeld(matching: nil)
        #expect(got19 == nil, "none left: it holds no more")
        let got20 = state.hold(event)
        #expect(got20 == nil)
        #expect(state.matching == ["a"])
    }

    @Test func aLiveQueryMakesEachChangeWhatItsViewSees() {
        var state = StreamState(limit: 1 << 20)
        let added = SessionEvent.document(.added(collection: "tasks", id: "a", fields: ["done": false]), document: ["done": false], id: 1)
        let enters = state.liveQueryFrame(added, collection: "tasks", id: "a", inside: true)
        #expect(enters.map { String(buffer: $0).contains("event: added") } == true)
        #expect(state.matching == ["a"])
        let changed = SessionEvent.document(
            .changed(collection: "tasks", id: "a", fields: ["n": 1], cleared: [], previous: [:]), document: ["done": false, "n": 1], id: 2)
        let got21 = state.liveQueryFrame(changed, collection: "tasks", id: "a", inside: true)
        #expect(got21 == changed.frame, "inside: as it is")
        let leaves = state.liveQueryFrame(changed, collection: "tasks", id: "a", inside: false)
        #expect(leaves.map { String(buffer: $0).contains("event: removed") } == true)
        #expect(state.matching.isEmpty)
        let got22 = state.liveQueryFrame(changed, collection: "tasks", id: "a", inside: false)
        #expect(got22 == nil, "outside: nothing")
    }
}
