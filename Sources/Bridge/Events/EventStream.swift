import CoreMetrics
public import DDP
import NIOCore

/// What a stream delivers: some collections, one document, or a live query over one collection.
public struct StreamFilter: Sendable {
    public var collections: Set<String>?
    /// A wire id (with exactly one collection).
    public var documentID: String?
    /// A live query (with exactly one collection): documents entering it are `added`, leaving it `removed`.
    public var selector: Selector?

    public init(collections: Set<String>? = nil, documentID: String? = nil, selector: Selector? = nil) {
        self.collections = collections
        self.documentID = documentID
        self.selector = selector
    }

    /// Whether a document passes the collection and id filters (the live query aside).
    func admits(collection: String, id: String) -> Bool {
        if let collections, !collections.contains(collection) { return false }
        if let documentID, documentID != id { return false }
        return true
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
        var frames: [ByteBuffer] = []
        var bytes = 0
        var dropped = 0
        /// The last frame to write before closing (overflow, session ended).
        var ending: [UInt8]?
        /// Live queries: ids of the documents currently inside the selector.
        var matching: Set<String> = []
        /// What the stream starts with (a replay, or a reset and snapshot): written at the pace
        /// the consumer reads, before any live frame, and not counted against the live buffer.
        var prelude: Prelude?
        /// Wakes the writer (a job on its connection's event loop, ``StreamHandOff``); until it
        /// is set, a ring is remembered and given to it when it is.
        var waker: StreamWaker?
        var rang = false

        /// The waker to ring now (`nil`: none yet, the ring is remembered).
        mutating func ring() -> StreamWaker? {
            guard let waker else {
                rang = true
                return nil
            }
            return waker
        }
    }

    /// The first frames of a stream, produced as the writer asks for them: a snapshot of any
    /// size reaches a consumer that keeps reading, however slowly, with memory for one chunk.
    struct Prelude: Sendable {
        var head: [ByteBuffer]
        var documents: ArraySlice<(collection: String, id: String, document: EJSONObject)>
        var tail: [ByteBuffer]

        /// Up to about `budget` bytes of frames, in order; `nil` when nothing is left.
        mutating func next(budget: Int) -> [ByteBuffer]? {
            var out: [ByteBuffer] = []
            var bytes = 0
            if !head.isEmpty {
                out = head
                bytes = head.reduce(0) { $0 + $1.readableBytes }
                head = []
            }
            while bytes < budget, let doc = documents.popFirst() {
                let (kind, payload) = SessionEvent.documentPayload(.added(collection: doc.collection, id: doc.id, fields: doc.document))
                let frame = ByteBuffer(bytes: SSEFrame.encode(id: nil, event: kind.rawValue, data: payload))
                bytes += frame.readableBytes
                out.append(frame)
            }
            if documents.isEmpty, bytes < budget, !tail.isEmpty {
                out += tail
                tail = []
            }
            return out.isEmpty ? nil : out
        }
    }

    /// Bytes of a prelude handed to the writer at a time.
    static let preludeChunk = 64 << 10

    let filter: StreamFilter
    let limit: Int
    let counters: StreamCounters?
    private let state: LockedState<State>

    init(filter: StreamFilter, limit: Int, counters: StreamCounters? = nil) {
        self.filter = filter
        self.limit = limit
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

    /// Routes one session event through the filter (and the live query) into the buffer; the
    /// writer's wake-up, if one is due, joins `wakeups` (rung once for the whole batch).
    func deliver(_ event: SessionEvent, into wakeups: inout Wakeups) {
        guard let collection = event.collection, let id = event.documentID else {
            enqueue(event.frame, into: &wakeups)
            return
        }
        guard filter.admits(collection: collection, id: id) else { return }
        guard let selector = filter.selector else {
            enqueue(event.frame, into: &wakeups)
            return
        }
        let inside = event.document.map { selector.matches(DocumentQuery.withID(id, $0)) } ?? false
        let frame: ByteBuffer? = state.withLock { state in
            let wasInside = state.matching.contains(id)
            switch (wasInside, inside) {
            case (false, true):
                state.matching.insert(id)
                return SessionEvent.document(.added(collection: collection, id: id, fields: event.document!), document: event.document, id: event.id)
                    .frame
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
        if let frame { enqueue(frame, into: &wakeups) }
    }

    func setMatching(_ ids: Set<String>) { state.withLock { $0.matching = ids } }

    /// Sets what the stream starts with (before any live frame) and wakes the writer.
    func start(with prelude: Prelude) {
        state.withLock { state in
            state.prelude = prelude
            return state.ring()
        }?.ring()
    }

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
        if let waker = state.withLock({ state in Self.append(frame, to: &state, limit: limit) ? state.ring() : nil }) { wakeups.add(waker) }
    }

    /// Appends under the lock; whether the writer must be woken (the buffer was empty: a
    /// non-empty buffer has a ring pending already, and the writer takes everything).
    private static func append(_ frame: ByteBuffer, to state: inout State, limit: Int) -> Bool {
        guard state.ending == nil else {
            state.dropped += 1
            return false
        }
        let wasEmpty = state.frames.isEmpty
        state.frames.append(frame)
        state.bytes += frame.readableBytes
        if state.bytes > limit {
            state.dropped += state.frames.count
            state.frames = []
            state.bytes = 0
            state.ending = SSEFrame.encode(
                id: nil, event: "error",
                data: [
                    "error": "slow-consumer",
                    "reason": .string("The stream fell more than \(limit) bytes behind; reconnect with Last-Event-ID to catch up")
                ])
            return true
        }
        return wasEmpty
    }

    /// Whether the stream has its last frame (cut, or ended): nothing more will be added.
    var hasEnded: Bool { state.withLock { $0.ending != nil } }

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
    /// copied, outside the lock, into one buffer (one write, one chunk). `more`: call again
    /// without waiting for a wake-up.
    func take() -> (bytes: ByteBuffer?, ending: [UInt8]?, more: Bool) {
        let (frames, ending, dropped, more) = state.withLock { state -> ([ByteBuffer], [UInt8]?, Int, Bool) in
            if state.ending == nil, state.prelude != nil {
                if let chunk = state.prelude!.next(budget: Self.preludeChunk) { return (chunk, nil, 0, true) }
                state.prelude = nil
            }
            let taken = (state.frames, state.ending, state.dropped, false)
            state.frames = []
            state.bytes = 0
            state.dropped = 0
            return taken
        }
        if !frames.isEmpty { counters?.delivered.increment(by: frames.count) }
        if dropped > 0 { counters?.dropped.increment(by: dropped) }
        guard let first = frames.first else { return (nil, ending, more) }
        guard frames.count > 1 else { return (first, ending, more) }
        var buffer = ByteBufferAllocator().buffer(capacity: frames.reduce(0) { $0 + $1.readableBytes })
        for var frame in frames { buffer.writeBuffer(&frame) }
        return (buffer, ending, more)
    }
}

/// What wakes a stream's writer.
enum StreamWaker: Sendable {
    /// Its connection's event loop writes it (``StreamHandOff``).
    case loop(any EventLoop, NIOLoopBound<StreamHandOff>)
    /// A task writes it (a connection without that writer).
    case task(AsyncStream<Void>.Continuation)

    func ring() {
        switch self {
        case .loop(let loop, let writer): loop.execute { writer.value.drain() }
        case .task(let bell): bell.yield()
        }
    }
}

/// The writers a batch of events woke, rung together: one job per event loop for all the
/// readers it writes (10,000 readers of a change on two loops: two jobs, not 10,000 wake-ups).
struct Wakeups {
    private var loops: [ObjectIdentifier: (loop: any EventLoop, writers: [NIOLoopBound<StreamHandOff>])] = [:]

    mutating func add(_ waker: StreamWaker) {
        switch waker {
        case .loop(let loop, let writer): loops[ObjectIdentifier(loop), default: (loop, [])].writers.append(writer)
        case .task(let bell): bell.yield()
        }
    }

    /// One job on each loop, writing what its readers have.
    func ring() {
        for (loop, writers) in loops.values {
            loop.execute { for writer in writers { writer.value.drain() } }
        }
    }
}
