import CoreMetrics
public import DDP
import NIOCore
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

/// One SSE consumer: a bounded buffer of encoded frames filled by the session (under its
/// lock) and drained by the writer (``StreamHandOff``, on the connection's event loop), with a
/// doorbell between them. A consumer that lets
/// the buffer overflow is cut off with a final event; memory never grows past the bound.
final class EventStream: Sendable {
    struct State: Sendable {
        /// The live frames not yet written, each the buffer shared by every stream (a reader
        /// that lags holds references, not copies): the first on its own, so a reader that keeps
        /// up (one frame per turn of its writer) allocates no array; the rest after it.
        var first: ByteBuffer?
        var more: [ByteBuffer] = []
        var bytes = 0
        /// Events waiting (a piece from a feed may hold several).
        var count = 0
        var dropped = 0
        /// The last frame to write before closing (overflow, session ended).
        var ending: [UInt8]?
        /// Live queries: ids of the documents currently inside the selector.
        var matching: Set<String> = []
        /// What the stream starts with (a replay, or a reset and snapshot): produced at the pace
        /// the consumer reads, before any live frame, and not counted against the live buffer.
        /// The writer takes it out while it works on a step (``take()``: it is the only caller).
        var prelude: StreamPrelude?
        /// A live query whose first match is still being walked: its events wait in `pending`
        /// (counted against the live buffer's bound) until the walk knows which documents are
        /// inside it; then they go through the live query in order.
        var holdsLive = false
        var pending: [SessionEvent] = []
        var pendingBytes = 0
        /// Wakes the writer (a job on its connection's event loop, ``StreamHandOff``); until it
        /// is set, a ring is remembered and given to it when it is.
        var waker: StreamWaker?
        var rang = false
        /// Told the stream's writer once it is known (``whenWriterKnown(_:)``).
        var onWriter: (@Sendable (EventStream, StreamWaker) -> Void)?

        /// The waker to ring now (`nil`: none yet, the ring is remembered).
        mutating func ring() -> StreamWaker? {
            guard let waker else {
                rang = true
                return nil
            }
            return waker
        }
    }

    /// Bytes of a prelude handed to the writer at a time.
    static let preludeChunk = 64 << 10
    /// The most time one step of a prelude may take on the writer's event loop before it yields
    /// the loop to the other connections (the walk reads the clock every few units of work).
    static let preludeSlice: Duration = .milliseconds(1)

    let filter: StreamFilter
    let limit: Int
    let counters: StreamCounters?
    private let state: LockedState<State>

    /// How long a prelude may wait on a reader that takes nothing (``StreamHandOff``).
    let stallTimeout: Duration
    /// Where its writer's timers run.
    let clock: BridgeClock

    init(
        filter: StreamFilter, limit: Int, stallTimeout: Duration = .seconds(30), clock: BridgeClock = .system, counters: StreamCounters? = nil
    ) {
        self.filter = filter
        self.limit = limit
        self.stallTimeout = stallTimeout
        self.clock = clock
        self.counters = counters
        self.state = LockedState(State())
    }

    /// Sets what wakes the writer when frames arrive in an empty buffer (or the stream ends);
    /// a ring that came before it is given to it now. `nil` drops it (the writer is gone).
    func setWaker(_ waker: StreamWaker?) {
        let rang = state.withLock { state in
            state.waker = waker
            defer { state.rang = false }
            return state.rang && waker != nil
        }
        if rang { waker?.ring() }
    }

    /// Calls `hook` with the stream and its writer's waker once the writer has taken its
    /// connection (``StreamHandOff/adopt(_:)``, on the writer's event loop); a session places the
    /// stream in its loop's feed there (``LoopFeed``). The stream is passed, not captured: a
    /// stream holding a closure that holds it weakly moved every retain of it to a slow path.
    func whenWriterKnown(_ hook: @escaping @Sendable (EventStream, StreamWaker) -> Void) {
        state.withLock { $0.onWriter = hook }
    }

    /// Called by the writer once it has taken the connection over, on its loop.
    func writerKnown(_ waker: StreamWaker) {
        let hook = state.withLock { state in
            defer { state.onWriter = nil }
            return state.onWriter
        }
        hook?(self, waker)
    }

    /// Routes one session event through the filter (and the live query) into the buffer; the
    /// writer's wake-up, if one is due, joins `wakeups` (rung once for the whole batch).
    func deliver(_ event: SessionEvent, into wakeups: inout Wakeups) {
        guard filter.passes(event) else { return }
        guard let selector = filter.selector else {
            enqueue(event.frame, into: &wakeups)
            return
        }
        // Until the first match is known, events wait (in order) for it. Once released, a
        // stream never holds again, so what was seen outside the lock stays true.
        if let held = state.withLock({ state in Self.hold(event, in: &state, limit: limit) }) {
            if let waker = held { wakeups.add(waker) }
            return
        }
        guard let collection = event.collection, let id = event.documentID else {
            enqueue(event.frame, into: &wakeups)
            return
        }
        guard let inside = liveMatch(selector, id, event.document) else { return }
        if let frame = state.withLock({ state in Self.liveQueryFrame(event, collection: collection, id: id, inside: inside, state: &state) }) {
            enqueue(frame, into: &wakeups)
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

    /// Keeps `event` for later while the live query's first match runs: `.some` (with the
    /// writer to wake when the stream was cut for holding too much), `nil` when not holding.
    private static func hold(_ event: SessionEvent, in state: inout State, limit: Int) -> StreamWaker?? {
        guard state.holdsLive else { return nil }
        guard state.ending == nil else { return .some(nil) }
        state.pending.append(event)
        state.pendingBytes += event.frame.readableBytes
        guard state.pendingBytes > limit else { return .some(nil) }
        state.dropped += state.pending.count
        state.pending = []
        state.pendingBytes = 0
        state.ending = slowConsumer(limit)
        return .some(state.ring())
    }

    /// What a document event becomes for a live query: `added` as it enters, `removed` as it
    /// leaves, itself while inside, nothing while outside. Under the stream's lock.
    private static func liveQueryFrame(_ event: SessionEvent, collection: String, id: String, inside: Bool, state: inout State) -> ByteBuffer? {
        let wasInside = state.matching.contains(id)
        switch (wasInside, inside) {
        case (false, true):
            state.matching.insert(id)
            guard let document = event.document else { return nil }
            return SessionEvent.document(.added(collection: collection, id: id, fields: document), document: document, id: event.id).frame
        case (true, true):
            return event.frame
        case (true, false):
            state.matching.remove(id)
            if event.kind == .removed { return event.frame }
            return SessionEvent.document(.removed(collection: collection, id: id, previous: event.document ?? [:]), document: nil, id: event.id)
                .frame
        case (false, false):
            return nil
        }
    }

    /// The live query's first match is known: the events held meanwhile go through it, in
    /// order (matched outside the lock; events that arrive meanwhile are held and taken next).
    /// Called by the writer, which takes the resulting frames next: no wake-up is needed.
    private func release(matching: Set<String>) {
        guard let selector = filter.selector else { return }
        var first = true
        while true {
            let held: [SessionEvent]? = state.withLock { state in
                if first { state.matching = matching }
                guard !state.pending.isEmpty else {
                    state.holdsLive = false
                    return nil
                }
                defer {
                    state.pending = []
                    state.pendingBytes = 0
                }
                return state.pending
            }
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
                if let frame = state.withLock({ state in Self.liveQueryFrame(event, collection: collection, id: id, inside: inside, state: &state) })
                {
                    enqueue(frame, into: &wakeups)
                }
            }
        }
    }

    /// Sets what the stream starts with (before any live frame) and wakes the writer. A live
    /// query's events wait for the walk's first match from now on.
    func start(with prelude: StreamPrelude) {
        state.withLock { state in
            state.prelude = prelude
            if filter.selector != nil, prelude.walk != nil { state.holdsLive = true }
            return state.ring()
        }?.ring()
    }

    /// Whether the stream still has a prelude to write (a reader making no progress on it is
    /// cut after a while: nothing else would ever cut it without live traffic).
    var hasPrelude: Bool { state.withLock { $0.prelude != nil || $0.holdsLive } }

    /// Adds one frame and wakes the writer if it sleeps; past the limit the buffer is dropped and
    /// the stream ends with a reason.
    func enqueue(_ frame: ByteBuffer) {
        var wakeups = Wakeups()
        enqueue(frame, into: &wakeups)
        wakeups.ring()
    }

    /// Adds one frame (the fan-out path: no array per event and stream); the writer's wake-up,
    /// if due, joins `wakeups`.
    func enqueue(_ frame: ByteBuffer, into wakeups: inout Wakeups) {
        if let waker = state.withLock({ state in Self.append(frame, count: 1, to: &state, limit: limit) ? state.ring() : nil }) {
            wakeups.add(waker)
        }
    }

    /// What a loop's feed does with a turn's bytes for this stream (``offer(joined:count:writable:)``).
    enum Offer {
        /// Nothing waits before them: the writer writes them now, as they are.
        case write
        /// They joined the buffer, which was empty: the writer is due.
        case wake
        /// They joined the buffer behind what waits there (or were dropped: the stream is over).
        case wait
    }

    /// `count` events in `frames`, `bytes` in all (a loop's feed: the same buffers for every
    /// reader of the loop). With the socket `writable`, nothing waiting before them (no prelude,
    /// no backlog, no last frame) and no more bytes than the stream's limit, they are counted
    /// delivered and written by the caller at once; else they are buffered as any frame is (past
    /// the limit the stream is cut as a slow consumer, as a session's own delivery cuts it).
    /// While a prelude is being written they wait for it: its writer's own steps take them after
    /// it (the feed's turn does not run a step of it for every such reader). On the writer's
    /// loop, one lock for all of it.
    func offer(_ frames: [ByteBuffer], bytes: Int, count: Int, writable: Bool) -> Offer {
        let offer = state.withLock { state -> Offer in
            let starting = state.prelude != nil || state.holdsLive
            if writable, !starting, state.first == nil, state.ending == nil, state.waker != nil, bytes <= limit { return .write }
            let due = Self.append(frames, bytes: bytes, count: count, to: &state, limit: limit) && state.ring() != nil
            return due && !starting ? .wake : .wait
        }
        if case .write = offer { counters?.delivered.increment(by: count) }
        return offer
    }

    /// Appends under the lock; whether the writer must be woken (the buffer was empty: a
    /// non-empty buffer has a ring pending already, and the writer takes everything).
    private static func append(_ frame: ByteBuffer, count: Int, to state: inout State, limit: Int) -> Bool {
        guard state.ending == nil else {
            state.dropped += count
            return false
        }
        let wasEmpty = state.first == nil
        if wasEmpty { state.first = frame } else { state.more.append(frame) }
        return added(frame.readableBytes, count: count, to: &state, limit: limit) || wasEmpty
    }

    /// ``append(_:count:to:limit:)`` for several frames (`bytes` in all).
    private static func append(_ frames: [ByteBuffer], bytes: Int, count: Int, to state: inout State, limit: Int) -> Bool {
        guard state.ending == nil else {
            state.dropped += count
            return false
        }
        let wasEmpty = state.first == nil
        for frame in frames {
            if state.first == nil { state.first = frame } else { state.more.append(frame) }
        }
        return added(bytes, count: count, to: &state, limit: limit) || wasEmpty
    }

    /// Counts what was appended; past the limit the buffer is dropped and the stream gets its
    /// last frame (`true`: the writer must be woken to write it).
    private static func added(_ bytes: Int, count: Int, to state: inout State, limit: Int) -> Bool {
        state.bytes += bytes
        state.count += count
        guard state.bytes <= limit else {
            state.dropped += state.count
            state.first = nil
            state.more = []
            state.bytes = 0
            state.count = 0
            state.ending = slowConsumer(limit)
            return true
        }
        return false
    }

    private static func slowConsumer(_ limit: Int) -> [UInt8] {
        SSEFrame.lastError(.slowConsumer, "The stream fell more than \(limit) bytes behind; reconnect with Last-Event-ID to catch up")
    }

    /// Whether the stream has its last frame (cut, or ended): nothing more will be added.
    var hasEnded: Bool { state.withLock { $0.ending != nil } }

    /// The last frame of a stream whose prelude waited `timeout` on a reader that took nothing.
    static func stalled(_ timeout: Duration) -> [UInt8] {
        SSEFrame.lastError(
            .slowConsumer,
            "The stream's start waited \(timeout) for a reader that took nothing (the --stream-stall-timeout); reconnect with Last-Event-ID to go on")
    }

    /// Ends the stream after what is buffered, with a last frame.
    func finish(with frame: [UInt8]) {
        state.withLock { state in
            if state.ending == nil { state.ending = frame }
            return state.ring()
        }?.ring()
    }

    /// What the writer sends next: a chunk of the prelude while there is one, else the buffered
    /// live frames (swapped out under the lock), and the ending if the stream is over. One frame
    /// is the shared buffer itself (no copy: the common case of a reader keeping up); several are
    /// copied, outside the lock, into one buffer (one write, one chunk). `more`: a step of the
    /// prelude was taken and more may follow; the writer yields its loop, then calls again.
    func take() -> (bytes: ByteBuffer?, ending: [UInt8]?, more: Bool) {
        let taken = state.withLock { state -> StreamPrelude? in
            guard state.ending == nil else { return nil }
            defer { state.prelude = nil }
            return state.prelude
        }
        if var prelude = taken {
            // A step runs outside the lock: the session's deliveries are not held up by it.
            switch prelude.next(budget: Self.preludeChunk, slice: Self.preludeSlice, filter: filter) {
            case .failed(let frame):
                finish(with: frame)
            case .done:
                if filter.selector != nil { release(matching: prelude.finishedMatching ?? []) }
            case .frames(let frames):
                state.withLock { $0.prelude = prelude }
                counters?.delivered.increment(by: frames.count)
                return (Self.joined(frames), nil, true)
            }
        }
        let (first, more, count, ending, dropped) = state.withLock { state in
            let taken = (state.first, state.more, state.count, state.ending, state.dropped)
            state.first = nil
            state.more = []
            state.bytes = 0
            state.count = 0
            state.dropped = 0
            return taken
        }
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
