import CoreMetrics
public import DDP
import NIOCore
import Synchronization
import Timing

/// What a stream delivers: some collections, one document, or a live query over one collection.
public struct StreamFilter: Sendable {
    public var collections: Set<String>? { didSet { onlyCollection = Self.only(collections) } }
    /// The one collection of a filter of one: compared as a string, without hashing it (the
    /// filter is checked for every event and stream; a public reader's names one collection).
    private var onlyCollection: String?
    /// A wire id (with exactly one collection).
    public var documentID: String?
    /// A live query (with exactly one collection): documents entering it are `added`, leaving it `removed`.
    public var selector: Selector?
    /// An MCP session's server stream: its frames are notifications for the resources it watches.
    var watch: MCPWatch?

    /// Whether the stream takes the session's events one by one, with frames of its own (a live
    /// query, an MCP stream), rather than the events' shared frames.
    var takesEventsOneByOne: Bool { selector != nil || watch != nil }

    public init(collections: Set<String>? = nil, documentID: String? = nil, selector: Selector? = nil) {
        self.collections = collections
        self.onlyCollection = Self.only(collections)
        self.documentID = documentID
        self.selector = selector
    }

    private static func only(_ collections: Set<String>?) -> String? {
        guard let collections, collections.count == 1 else { return nil }
        return collections.first
    }

    /// Whether a document passes the collection and id filters (the live query aside).
    func admits(collection: String, id: String) -> Bool {
        if let onlyCollection {
            if onlyCollection != collection { return false }
        } else if let collections, !collections.contains(collection) {
            return false
        }
        if let documentID, documentID != id { return false }
        return true
    }

    /// Whether an event passes the collection and id filters (the live query aside): an event of
    /// no document always does.
    func passes(_ event: SessionEvent) -> Bool {
        guard let collection = event.collection, let id = event.documentID else { return true }
        return admits(collection: collection, id: id)
    }

    /// Whether a document is in the stream's view, live query included.
    func matches(collection: String, id: String, document: EJSONObject) -> Bool {
        guard admits(collection: collection, id: id) else { return false }
        guard let selector else { return true }
        return selector.matches(DocumentQuery.withID(id, document))
    }
}

/// One SSE consumer: a bounded buffer of encoded frames filled by its loop's feed
/// (``LoopFeed``) and drained by the writer (``StreamHandOff``), both on the connection's event
/// loop, where the stream's state lives (``StreamState``, confined to that loop: no lock). Who
/// ends it from elsewhere (a closed connection, shutdown) hands the ending to the loop. A
/// consumer that lets the buffer overflow is cut off with a final event; memory never grows
/// past the bound.
final class EventStream: Sendable {
    /// Bytes of a prelude handed to the writer at a time.
    static let preludeChunk = 64 << 10
    /// The most time one step of a prelude may take on the writer's event loop before it yields
    /// the loop to the other connections (the walk reads the clock every few units of work).
    static let preludeSlice: Duration = .milliseconds(1)

    let filter: StreamFilter
    let limit: Int
    let counters: StreamCounters?
    /// The connection's event loop: the stream's state, its feed and its writer are there.
    let loop: any EventLoop
    private let state: NIOLoopBoundBox<StreamState>
    /// Whether the state has its last frame, readable anywhere (shutdown counts the streams
    /// still ending); set on the loop as the state gets it.
    private let ended = Atomic<Bool>(false)

    /// How long a prelude may wait on a reader that takes nothing (``StreamHandOff``).
    let stallTimeout: Duration
    /// Where its writer's timers run.
    let clock: BridgeClock

    init(
        filter: StreamFilter, limit: Int, loop: any EventLoop, stallTimeout: Duration = .seconds(30), clock: BridgeClock = .system,
        counters: StreamCounters? = nil
    ) {
        self.filter = filter
        self.limit = limit
        self.loop = loop
        self.stallTimeout = stallTimeout
        self.clock = clock
        self.counters = counters
        self.state = NIOLoopBoundBox.makeBoxSendingValue(StreamState(limit: limit), eventLoop: loop)
    }

    /// Runs a step of the machine on the loop, noting when the state gets its last frame. One
    /// access to the box, in place (its getter would copy the state, and retain what it holds).
    private func withState<Result>(_ body: (inout StreamState) -> Result) -> Result {
        func step(_ state: inout StreamState) -> (Result, Bool) { (body(&state), state.hasEnded) }
        let (result, hasEnded) = step(&state.value)
        if hasEnded, !ended.load(ordering: .relaxed) { ended.store(true, ordering: .releasing) }
        return result
    }

    /// Sets what wakes the writer when frames arrive in an empty buffer (or the stream ends);
    /// a ring that came before it is given to it now. `nil` drops it (the writer is gone). On
    /// the loop.
    func setWaker(_ waker: StreamWaker?) {
        if withState({ $0.setWaker(waker) }) { waker?.ring() }
    }

    /// The stream's writer, once it has taken its connection (on the loop): a loop's feed hands
    /// it the turn's shared buffers; before that, they join the stream's buffer.
    var writer: NIOLoopBound<any StreamSink>? { withState { $0.waker?.writer } }

    /// Routes one session event through the filter (and the live query) into the buffer; the
    /// writer's wake-up, if one is due, joins `wakeups` (rung once for the whole batch). On the loop.
    func deliver(_ event: SessionEvent, into wakeups: inout Wakeups) {
        if let watch = filter.watch {
            // An ended stream takes nothing: notes of notifications it would drop are not kept.
            guard !hasEnded else { return }
            let (frames, flushAt) = watch.frames(for: event, now: clock.now)
            if let frames { enqueue(frames, into: &wakeups) }
            if let flushAt { flush(watch, at: flushAt) }
            return
        }
        guard filter.passes(event) else { return }
        guard let selector = filter.selector else {
            enqueue(event.frame, into: &wakeups)
            return
        }
        // Until the first match is known, events wait (in order) for it.
        if let held = withState({ $0.hold(event) }) {
            if let waker = held { wakeups.add(waker) }
            return
        }
        guard let collection = event.collection, let id = event.documentID else {
            enqueue(event.frame, into: &wakeups)
            return
        }
        guard let inside = liveMatch(selector, id, event.document) else { return }
        if let frame = withState({ $0.liveQueryFrame(event, collection: collection, id: id, inside: inside) }) {
            enqueue(frame, into: &wakeups)
        }
    }

    /// An MCP stream's coalesced notifications, due at `instant`: a timer of the stream's loop
    /// writes those whose interval has ended and sets itself again for the rest. A stream that
    /// has ended takes nothing more.
    private func flush(_ watch: MCPWatch, at instant: ContinuousClock.Instant) {
        _ = clock.schedule(after: max(instant - clock.now, .zero), on: loop) { [weak self] in
            guard let self, !self.hasEnded else { return watch.flushDropped() }
            let (frames, again) = watch.flush(now: self.clock.now)
            if let frames {
                var wakeups = Wakeups()
                self.enqueue(frames, into: &wakeups)
                wakeups.ring()
            }
            if let again { self.flush(watch, at: again) }
        }
    }

    /// The most work one change may cost a live query (``Selector/Work``): its match runs where
    /// changes are delivered (the reader's loop, once its writer is known). A selector that needs more for
    /// one document ends its stream (a first match is bounded by the query time budget instead).
    static let liveMatchCeiling = 250_000

    /// Whether a changed document is inside the live query (`false` once removed); `nil` when
    /// matching it costs more than ``liveMatchCeiling``: the stream is ended.
    private func liveMatch(_ selector: Selector, _ id: String, _ document: EJSONObject?) -> Bool? {
        guard let document else { return false }
        var work = Selector.Work(ceiling: Self.liveMatchCeiling, every: 4096)
        let inside = selector.matches(DocumentQuery.withID(id, document), work: &work)
        guard work.isStopped else { return inside }
        finish(
            with: SnapshotWalk.tooExpensive(
                "Matching one changed document against the stream's selector took more than \(Self.liveMatchCeiling) units of work; narrow the selector"
            ))
        return nil
    }

    /// The live query's first match is known: the events held meanwhile go through it, in
    /// order. Called by the writer, on the loop, which takes the resulting frames next: no
    /// wake-up is needed.
    private func release(matching: Set<String>) {
        guard let selector = filter.selector else { return }
        var first = true
        while true {
            let held = withState { $0.takeHeld(matching: first ? matching : nil) }
            first = false
            guard let held else { return }
            var insides: [Bool] = []
            for event in held {
                guard let id = event.documentID else {
                    insides.append(false)
                    continue
                }
                guard let inside = liveMatch(selector, id, event.document) else { return }
                insides.append(inside)
            }
            var wakeups = Wakeups()
            for (event, inside) in zip(held, insides) {
                guard let collection = event.collection, let id = event.documentID else {
                    enqueue(event.frame, into: &wakeups)
                    continue
                }
                if let frame = withState({ $0.liveQueryFrame(event, collection: collection, id: id, inside: inside) }) {
                    enqueue(frame, into: &wakeups)
                }
            }
        }
    }

    /// Sets what the stream starts with (before any live frame) and wakes the writer. A live
    /// query's events wait for the walk's first match from now on. On the loop (its feed takes
    /// the stream with its start, ``LoopFeed/Content/join(_:_:)``).
    func start(with prelude: StreamPrelude) {
        withState { $0.start(with: prelude, holdsLive: filter.selector != nil && prelude.walk != nil) }?.ring()
    }

    /// Whether the stream still has a prelude to write (a reader making no progress on it is
    /// cut after a while: nothing else would ever cut it without live traffic). On the loop.
    var hasPrelude: Bool { withState { $0.isStarting } }

    /// Adds one frame, on the loop (past the limit the buffer is dropped and the stream ends with
    /// a reason); the writer's wake-up, if due, joins `wakeups`.
    func enqueue(_ frame: ByteBuffer, into wakeups: inout Wakeups) {
        if let waker = withState({ $0.append(frame) }) { wakeups.add(waker) }
    }

    /// `count` events in `frames`, `bytes` in all (a loop's feed: the same buffers for every
    /// reader of the loop). With the socket `writable`, nothing waiting before them (no prelude,
    /// no backlog, no last frame) and no more bytes than the stream's limit, they are counted
    /// delivered and written by the caller at once; else they are buffered as any frame is (past
    /// the limit the stream is cut as a slow consumer, as a session's own delivery cuts it).
    /// While a prelude is being written they wait for it: its writer's own steps take them after
    /// it (the feed's turn does not run a step of it for every such reader). On the loop.
    func offer(_ frames: [ByteBuffer], bytes: Int, count: Int, writable: Bool) -> StreamState.Offer {
        let offer = withState { $0.offer(frames, bytes: bytes, count: count, writable: writable) }
        if case .write = offer { counters?.delivered.increment(by: count) }
        return offer
    }

    /// Whether the stream has its last frame (cut, or ended): nothing more will be added. Read
    /// anywhere.
    var hasEnded: Bool { ended.load(ordering: .acquiring) }

    /// The last frame of a stream whose prelude waited `timeout` on a reader that took nothing.
    static func stalled(_ timeout: Duration) -> [UInt8] {
        SSEFrame.lastError(
            .slowConsumer,
            "The stream's start waited \(timeout) for a reader that took nothing (the --stream-stall-timeout); reconnect with Last-Event-ID to go on")
    }

    /// Ends the stream after what is buffered, with a last frame: now on the loop, else in a job
    /// of it (a closed connection, shutdown, a lost login).
    func finish(with frame: [UInt8]) {
        guard loop.inEventLoop else {
            loop.execute { self.finish(with: frame) }
            return
        }
        withState { $0.finish(with: frame) }?.ring()
    }

    /// What the writer sends next: a chunk of the prelude while there is one, else the buffered
    /// live frames, and the ending if the stream is over. One frame is the shared buffer itself
    /// (no copy: the common case of a reader keeping up); several are copied into one buffer
    /// (one write, one chunk). `more`: a step of the
    /// prelude was taken and more may follow; the writer yields its loop, then calls again.
    func take() -> (bytes: ByteBuffer?, ending: [UInt8]?, more: Bool) {
        let taken = withState { $0.takePrelude() }
        if var prelude = taken {
            switch prelude.next(budget: Self.preludeChunk, slice: Self.preludeSlice, filter: filter) {
            case .failed(let frame):
                finish(with: frame)
            case .done:
                if filter.selector != nil { release(matching: prelude.finishedMatching ?? []) }
            case .frames(let frames):
                withState { $0.prelude = prelude }
                counters?.delivered.increment(by: frames.count)
                return (Self.joined(frames), nil, true)
            }
        }
        let (first, more, count, ending, dropped) = withState { $0.takeBuffered() }
        if dropped > 0 { counters?.dropped.increment(by: dropped) }
        guard let first else { return (nil, ending, false) }
        counters?.delivered.increment(by: count)
        return (more.isEmpty ? first : Self.joined([first] + more), ending, false)
    }

    /// One frame as it is (the shared buffer); several copied into one buffer; `nil` for none.
    static func joined(_ frames: [ByteBuffer]) -> ByteBuffer? {
        guard let first = frames.first else { return nil }
        guard frames.count > 1 else { return first }
        var buffer = ByteBufferAllocator().buffer(capacity: frames.reduce(0) { $0 + $1.readableBytes })
        for var frame in frames { buffer.writeBuffer(&frame) }
        return buffer
    }
}

/// Where an event stream's bytes go: its connection's writer, on that connection's event loop.
/// Events frames nothing and knows nothing of the protocol that carries the bytes; the HTTP
/// layer implements this (``StreamHandOff``: SSE over a chunked or close-delimited response).
/// Called on the sink's loop only.
protocol StreamSink: AnyObject {
    /// Writes what its stream has, while the connection takes it (the stream's doorbell).
    func drain()
    /// A turn of the loop's feed for `stream` (``LoopFeed``): the same buffers for every stream
    /// of the loop with the same filter.
    func feed(_ stream: EventStream, _ turn: LoopFeed.Turn)
}

/// What wakes a stream's writer: a job on its connection's event loop.
struct StreamWaker: Sendable {
    let loop: any EventLoop
    let writer: NIOLoopBound<any StreamSink>

    func ring() { loop.execute { writer.value.drain() } }
}

/// The writers a batch of events woke, rung together: one job per event loop for all the
/// readers it writes (10,000 readers of a change on two loops: two jobs, not 10,000 wake-ups).
struct Wakeups {
    private var loops: [ObjectIdentifier: (loop: any EventLoop, writers: [NIOLoopBound<any StreamSink>])] = [:]

    mutating func add(_ waker: StreamWaker) {
        loops[ObjectIdentifier(waker.loop), default: (waker.loop, [])].writers.append(waker.writer)
    }

    /// One job on each loop, writing what its readers have.
    func ring() {
        for (loop, writers) in loops.values {
            loop.execute { for writer in writers { writer.value.drain() } }
        }
    }
}
