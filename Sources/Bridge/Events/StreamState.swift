import DDP
import NIOCore

/// An event stream's state as a value, and its machine: what each input does to it (an event or
/// frames delivered, a turn of a loop's feed offered, a start, an ending, the writer taking what
/// waits) and what the shell must do then (ring the writer's waker, write at once). Pure: no
/// lock, no I/O, no clock; tested without sockets (`StreamStateTests`). ``EventStream`` is its
/// shell: it holds the state on its connection's event loop, runs the live query's matching,
/// and rings what the machine returns.
///
/// Its bound: the live frames waiting, and a live query's events held while its first match
/// runs, are each at most `limit` bytes; past it the waiting bytes are dropped and the stream
/// gets its last frame (a slow consumer's).
struct StreamState: Sendable {
    /// The most bytes of live frames (and of held events) the stream keeps.
    let limit: Int

    /// The live frames not yet written, each the buffer shared by every stream (a reader that
    /// lags holds references, not copies): the first on its own, so a reader that keeps up (one
    /// frame per turn of its writer) allocates no array; the rest after it.
    private(set) var first: ByteBuffer?
    private(set) var more: [ByteBuffer] = []
    private(set) var bytes = 0
    /// Events waiting (a piece from a feed may hold several).
    private(set) var count = 0
    /// Events dropped since the writer last took what waits (counted then).
    private(set) var dropped = 0
    /// The last frame to write before closing (overflow, session ended).
    private(set) var ending: [UInt8]?
    /// Live queries: ids of the documents currently inside the selector.
    private(set) var matching: Set<String> = []
    /// What the stream starts with (a replay, or a reset and snapshot): produced at the pace the
    /// consumer reads, before any live frame, and not counted against the live buffer. The
    /// writer takes it out while it works on a step (``takePrelude()``) and puts it back.
    var prelude: StreamPrelude?
    /// A live query whose first match is still being walked: its events wait in `pending`
    /// (counted against the bound) until the walk knows which documents are inside it.
    private(set) var holdsLive = false
    private(set) var pending: [SessionEvent] = []
    private(set) var pendingBytes = 0
    /// Wakes the writer; until it is set, a ring is remembered and given to it when it is.
    private(set) var waker: StreamWaker?
    private(set) var rang = false

    init(limit: Int) {
        self.limit = limit
    }

    /// A start (a prelude) or a live query's first match is still to be written: live frames wait.
    var isStarting: Bool { prelude != nil || holdsLive }

    /// The stream has its last frame (cut, or ended): nothing more is added.
    var hasEnded: Bool { ending != nil }

    // MARK: - The writer's waker

    /// The waker to ring now (`nil`: none yet, and the ring is remembered).
    mutating func ring() -> StreamWaker? {
        guard let waker else {
            rang = true
            return nil
        }
        return waker
    }

    /// Sets (or drops) the waker; `true` when a ring came before it and must be given to it now.
    mutating func setWaker(_ waker: StreamWaker?) -> Bool {
        self.waker = waker
        defer { rang = false }
        return rang && waker != nil
    }

    // MARK: - Live frames

    /// One frame (`count` events) appended; the waker to ring when the writer is due (the buffer
    /// was empty: a non-empty one has a ring pending already), or when the stream was cut.
    mutating func append(_ frame: ByteBuffer, count: Int = 1) -> StreamWaker? {
        guard ending == nil else {
            dropped += count
            return nil
        }
        let wasEmpty = first == nil
        if wasEmpty { first = frame } else { more.append(frame) }
        return added(frame.readableBytes, count: count) || wasEmpty ? ring() : nil
    }

    /// What a loop's feed does with a turn's bytes for this stream (``offer(_:bytes:count:writable:)``).
    enum Offer: Equatable {
        /// Nothing waits before them: the writer writes them now, as they are.
        case write
        /// They joined the buffer, which was empty: the writer is due.
        case wake
        /// They joined the buffer behind what waits there (or were dropped: the stream is over).
        case wait
    }

    /// `count` events in `frames`, `bytes` in all (a turn of a loop's feed). With the socket
    /// `writable`, a writer, nothing waiting before them (no start, no backlog, no last frame) and
    /// no more bytes than the limit, the writer writes them at once (`.write`: they are not
    /// kept); else they are buffered as any frame is, and past the limit the stream is cut. While
    /// a start is being written they wait for it: the writer's own steps take them after it.
    mutating func offer(_ frames: [ByteBuffer], bytes: Int, count: Int, writable: Bool) -> Offer {
        if writable, !isStarting, first == nil, ending == nil, waker != nil, bytes <= limit { return .write }
        guard ending == nil else {
            dropped += count
            return .wait
        }
        let wasEmpty = first == nil
        for frame in frames {
            if first == nil { first = frame } else { more.append(frame) }
        }
        let due = (added(bytes, count: count) || wasEmpty) && ring() != nil
        return due && !isStarting ? .wake : .wait
    }

    /// Counts what was appended; past the limit the buffer is dropped and the stream gets its
    /// last frame (`true`: the writer must be woken to write it).
    private mutating func added(_ bytes: Int, count: Int) -> Bool {
        self.bytes += bytes
        self.count += count
        guard self.bytes <= limit else {
            dropped += self.count
            first = nil
            more = []
            self.bytes = 0
            self.count = 0
            ending = Self.slowConsumer(limit)
            return true
        }
        return false
    }

    /// Ends the stream after what is buffered, with `frame` (a first ending stays); the waker to ring.
    mutating func finish(with frame: [UInt8]) -> StreamWaker? {
        if ending == nil { ending = frame }
        return ring()
    }

    /// What the writer takes: the live frames waiting, their count, the last frame, and how many
    /// events were dropped since it last took; the buffer is empty after.
    mutating func takeBuffered() -> (first: ByteBuffer?, more: [ByteBuffer], count: Int, ending: [UInt8]?, dropped: Int) {
        let taken = (first, more, count, ending, dropped)
        first = nil
        more = []
        bytes = 0
        count = 0
        dropped = 0
        return taken
    }

    // MARK: - The start

    /// The stream starts with `prelude`; `holdsLive`: a live query whose first match the prelude
    /// walks (its events wait for it). The waker to ring.
    mutating func start(with prelude: StreamPrelude, holdsLive: Bool) -> StreamWaker? {
        self.prelude = prelude
        if holdsLive { self.holdsLive = true }
        return ring()
    }

    /// The prelude, taken out for a step (`nil`: none, or the stream has ended).
    mutating func takePrelude() -> StreamPrelude? {
        guard ending == nil else { return nil }
        defer { prelude = nil }
        return prelude
    }

    // MARK: - Live queries

    /// Keeps `event` while the live query's first match runs: `.some` when kept (with the waker
    /// to ring when the stream was cut for holding more than the limit), `nil` when not holding.
    mutating func hold(_ event: SessionEvent) -> StreamWaker?? {
        guard holdsLive else { return nil }
        guard ending == nil else { return .some(nil) }
        pending.append(event)
        pendingBytes += event.frame.readableBytes
        guard pendingBytes > limit else { return .some(nil) }
        dropped += pending.count
        pending = []
        pendingBytes = 0
        ending = Self.slowConsumer(limit)
        return .some(ring())
    }

    /// The events held while the first match ran, taken to go through the query in order;
    /// `matching`, the first match, is set first when given. `nil` once none is left: the stream
    /// holds no more from then on.
    mutating func takeHeld(matching: Set<String>?) -> [SessionEvent]? {
        if let matching { self.matching = matching }
        guard !pending.isEmpty else {
            holdsLive = false
            return nil
        }
        defer {
            pending = []
            pendingBytes = 0
        }
        return pending
    }

    /// What a document event becomes for a live query, `inside` saying whether the document
    /// matches now: `added` as it enters, itself while inside, `removed` as it leaves, nothing
    /// while outside.
    mutating func liveQueryFrame(_ event: SessionEvent, collection: String, id: String, inside: Bool) -> ByteBuffer? {
        let wasInside = matching.contains(id)
        switch (wasInside, inside) {
        case (false, true):
            matching.insert(id)
            guard let document = event.document else { return nil }
            return SessionEvent.document(.added(collection: collection, id: id, fields: document), document: document, id: event.id).frame
        case (true, true):
            return event.frame
        case (true, false):
            matching.remove(id)
            if event.kind == .removed { return event.frame }
            return SessionEvent.document(.removed(collection: collection, id: id, previous: event.document ?? [:]), document: nil, id: event.id)
                .frame
        case (false, false):
            return nil
        }
    }

    /// A slow consumer's last frame.
    static func slowConsumer(_ limit: Int) -> [UInt8] {
        SSEFrame.lastError(.slowConsumer, "The stream fell more than \(limit) bytes behind; reconnect with Last-Event-ID to catch up")
    }
}
