import DDP
import HashTreeCollections
import NIOCore
import Timing

/// What a stream starts with, before any live frame: a replay of the session's log from a resume
/// position, or a reset, a snapshot of the matching documents and its marker. It is a cursor, not
/// a copy: the writer asks for the next chunk when its socket takes more (``EventStream/take()``),
/// and only then are frames read from the log or documents matched and encoded. A reader who
/// does not read holds one chunk, whatever the size of the log or of the document set.
struct StreamPrelude: Sendable {
    /// Frames before the rest (a `reset`).
    var head: [ByteBuffer]
    var walk: SnapshotWalk?
    var replay: Replay?
    /// The `snapshot` marker's id (the log position the snapshot reflects), written after the walk.
    var marker: UInt64?

    /// A replay of the session's log: the events after `after` up to `through` (the log's position
    /// when the stream attached; what follows reaches the stream live), read a page at a time.
    struct Replay: Sendable {
        var after: UInt64
        let through: UInt64
        /// Reads a page of the log (``EventLog/events(after:through:maxBytes:)``) under the
        /// session's lock; `nil` when the log no longer holds the events (the reader fell behind it).
        let read: @Sendable (_ after: UInt64, _ through: UInt64, _ maxBytes: Int) -> [SessionEvent]?
    }

    /// What one step produced.
    enum Step {
        /// Frames to write (possibly none: the step did its share of work and found nothing yet).
        case frames([ByteBuffer])
        /// Nothing is left.
        case done
        /// The prelude cannot go on; the stream ends with this frame.
        case failed([UInt8])
    }

    /// The next frames, up to about `budget` bytes, doing at most about `slice` of work (the
    /// writer calls it on its connection's event loop, which must not be held for long).
    mutating func next(budget: Int, slice: Duration, filter: StreamFilter) -> Step {
        var out: [ByteBuffer] = []
        var bytes = 0
        if !head.isEmpty {
            out = head
            bytes = head.reduce(0) { $0 + $1.readableBytes }
            head = []
        }
        if var replay = self.replay {
            self.replay = nil
            guard let events = replay.read(replay.after, replay.through, budget) else { return .failed(Self.fellBehind) }
            for event in events {
                replay.after = event.id
                if let c = event.collection, let id = event.documentID, !filter.admits(collection: c, id: id) { continue }
                out.append(event.frame)
                bytes += event.frame.readableBytes
            }
            if !events.isEmpty, replay.after < replay.through { self.replay = replay }
            return out.isEmpty && self.replay == nil && walk == nil && marker == nil ? .done : .frames(out)
        }
        if var walk = self.walk {
            self.walk = nil
            switch walk.step(into: &out, bytes: &bytes, budget: budget, slice: slice) {
            case .more: self.walk = walk
            case .finished: self.walk = walk  // kept until the marker is written: its count and matches
            case .overBudget(let failure): return .failed(failure)
            }
        }
        if let walk, walk.isFinished, let marker {
            self.marker = nil
            if walk.emits {
                out.append(ByteBuffer(bytes: SSEFrame.encode(id: marker, event: "snapshot", data: ["count": .int(walk.emitted)])))
            }
        }
        if out.isEmpty, replay == nil, walk?.isFinished ?? true, marker == nil { return .done }
        return .frames(out)
    }

    /// The live query's matching set, once the walk is over (`nil` before, or without a walk).
    var finishedMatching: Set<String>? {
        guard let walk, walk.isFinished, marker == nil, walk.tracksMatching else { return nil }
        return walk.matching
    }

    static let fellBehind = SSEFrame.lastError(
        .slowConsumer, "The stream's replay fell behind the session's event log; reconnect with Last-Event-ID to get a reset and a snapshot")
}

/// A snapshot's documents, walked from versions of the collections taken when the stream
/// attached. The versions cost nothing to take (``DocumentCache/Collection/documents`` is a
/// persistent map) and pin only what changed after them; the walk matches the stream's filter
/// document by document, a slice of work at a time, and encodes only what it hands out.
struct SnapshotWalk: Sendable {
    typealias Documents = TreeDictionary<String, EJSONObject>

    let filter: StreamFilter
    /// Frames are made for the documents (`false`: a live query without a snapshot, which only
    /// needs to know which documents are inside it).
    let emits: Bool
    let tracksMatching: Bool
    private var collections: [(name: String, documents: Documents)]
    private var current = 0
    private var position: Documents.Index?
    private(set) var emitted = 0
    private(set) var matching: Set<String> = []
    private(set) var isFinished = false
    /// Matching time spent so far, against `limit` (the query time budget).
    private(set) var spent: Duration = .zero
    let limit: Duration
    /// What the matching time is read from.
    let clock: BridgeClock

    init(collections: [(name: String, documents: Documents)], filter: StreamFilter, emits: Bool, limit: Duration, clock: BridgeClock) {
        self.clock = clock
        self.collections = collections
        self.filter = filter
        self.emits = emits
        self.tracksMatching = filter.selector != nil
        self.limit = limit
        self.isFinished = collections.isEmpty
    }

    enum Outcome {
        case more
        case finished
        case overBudget([UInt8])
    }

    /// Matches documents until `budget` bytes of frames are out or `slice` of time is spent; the
    /// clock is read every few units of work (``Selector/Work``), inside a document too.
    mutating func step(into out: inout [ByteBuffer], bytes: inout Int, budget: Int, slice: Duration) -> Outcome {
        guard !isFinished else { return .finished }
        let clock = self.clock
        let started = clock.now
        let (before, limit) = (spent, self.limit)
        var work = Selector.Work(every: 256) { before + (clock.now - started) > limit }
        var nextLook = 256
        defer { spent += clock.now - started }
        while current < collections.count {
            let documents = collections[current].documents
            var index = position ?? documents.startIndex
            while index != documents.endIndex {
                let (id, document) = documents[index]
                index = documents.index(after: index)
                work.add(1)
                let inside = matches(collection: collections[current].name, id: id, document: document, work: &work)
                if work.isStopped {
                    position = index
                    return .overBudget(overBudget(before + (clock.now - started)))
                }
                if inside {
                    if tracksMatching { matching.insert(id) }
                    if emits {
                        let frame = Self.added(collections[current].name, id, document)
                        bytes += frame.readableBytes
                        out.append(frame)
                        emitted += 1
                    }
                }
                if bytes >= budget {
                    position = index
                    return .more
                }
                if work.units >= nextLook {
                    nextLook = work.units + 256
                    if clock.now - started >= slice {
                        position = index
                        return .more
                    }
                }
            }
            position = nil
            current += 1
        }
        collections = []
        isFinished = true
        return .finished
    }

    private func matches(collection: String, id: String, document: EJSONObject, work: inout Selector.Work) -> Bool {
        guard filter.admits(collection: collection, id: id) else { return false }
        guard let selector = filter.selector else { return true }
        return selector.matches(DocumentQuery.withID(id, document), work: &work)
    }

    static func added(_ collection: String, _ id: String, _ document: EJSONObject) -> ByteBuffer {
        let (kind, payload) = SessionEvent.documentPayload(.added(collection: collection, id: id, fields: document))
        return ByteBuffer(bytes: SSEFrame.encode(id: nil, event: kind.rawValue, data: payload))
    }

    private func overBudget(_ spent: Duration) -> [UInt8] {
        Self.tooExpensive(
            "The stream's selector spent \(spent) matching documents without finishing within \(limit) (the --query-time-budget); narrow the selector"
        )
    }

    /// A live query's last event when matching costs more than it may.
    static func tooExpensive(_ reason: String) -> [UInt8] { SSEFrame.lastError(.queryTooExpensive, reason) }
}
