import NIOCore

/// The streams of one session on one event loop, served by a job of that loop
/// (docs/ARCHITECTURE.md, "A loop's feed"): the only way from a session to its streams. The
/// session posts each batch of events here once, under its lock, whatever the number of
/// streams; a stream joins (with its start) and leaves as an entry too, so what it takes is
/// exactly what was posted between the two. A job of the loop takes every entry posted since
/// its last turn, routes each filter's frames once (``Turn``: small frames joined into one
/// buffer, a large one kept as the shared frame itself, never copied) and hands those same
/// buffers to each stream's sink (``StreamSink``), which writes them (framed once for all the
/// streams of a filter: the turn keeps what the first sink made); a stream whose writer has not
/// taken its connection yet keeps them in its buffer. So a change costs the session one post per
/// loop (not one append per stream, on the loop that reads the upstream), and a reader that
/// keeps up costs its loop one write of shared buffers, whatever the number of distinct filters.
///
/// A live query's stream is a member too, but takes the events one by one and matches each
/// against the documents it holds (its frames are its own: `added` as a document enters,
/// `removed` as it leaves), on the reader's loop; so does an MCP session's server stream (its
/// frames are notifications, ``MCPWatch``).
///
/// What queues while the loop writes goes out together in its next turn, one write per stream
/// (the changes are not folded: each event is in the turn's bytes). A stream that lags keeps
/// its backlog in its own bounded buffer (``EventStream``), references to the same buffers, and
/// a turn's bytes larger than that bound cut the stream as a slow consumer, written or not.
///
/// Order: entries are numbered as they are posted, under the session's lock; a stream takes the
/// entries after its `join` (its start comes first: a replay of the log up to it, or a
/// snapshot). A session's last frame is an entry too, behind its events.
///
/// Members, and every stream's state, are touched on the loop only; the queue is behind its own
/// lock, taken after the session's (post) or alone (the loop's job).
final class LoopFeed: Sendable {
    /// What the session posts.
    enum Content: Sendable {
        case events([SessionEvent])
        /// The session's last frame for its streams (it is closing).
        case finish([UInt8])
        /// A stream joins, with what it starts with (``EventStream/start(with:)``): it takes
        /// the entries after this one.
        case join(EventStream, StreamPrelude?)
        /// A stream leaves (its connection closed): it takes nothing more.
        case leave(ObjectIdentifier)
        /// A comment line to every stream, so proxies keep idle streams open.
        case heartbeat
    }

    struct Entry: Sendable {
        let number: UInt64
        let content: Content
    }

    private struct Queue: Sendable {
        var entries: [Entry] = []
        var posted: UInt64 = 0
        var scheduled = false
    }

    let loop: any EventLoop
    private let queue = LockedState(Queue())
    private let members: NIOLoopBoundBox<Members>

    /// Made anywhere (by the session, under its lock); its members are the loop's alone.
    init(loop: any EventLoop) {
        self.loop = loop
        members = NIOLoopBoundBox.makeBoxSendingValue(Members(), eventLoop: loop)
    }

    /// Posts one entry (under the session's lock, in order) and wakes the loop's job unless one is
    /// due already.
    func post(_ content: Content) {
        let wake = queue.withLock { queue in
            queue.posted += 1
            queue.entries.append(Entry(number: queue.posted, content: content))
            defer { queue.scheduled = true }
            return !queue.scheduled
        }
        if wake { loop.execute { self.run() } }
    }

    /// The loop's job: every entry posted since its last turn, to every member.
    func run() {
        let entries = queue.withLock { queue in
            queue.scheduled = false
            defer { queue.entries = [] }
            return queue.entries
        }
        guard let first = entries.first?.number else { return }
        members.value.route(entries, first: first)
    }

    /// How many streams the feed writes (on the loop).
    var memberCount: Int { members.value.count }
}

extension LoopFeed {
    /// What one filter takes of a turn's entries: its frames (references to the shared frames;
    /// runs of small ones joined into one buffer) and the session's last frame if it came. One
    /// object for every stream of the filter on the loop, used on the loop only: the first sink
    /// that frames the frames for its connection keeps the result here for the others
    /// (``framed(by:)``).
    final class Turn {
        private(set) var frames: [ByteBuffer] = []
        private(set) var bytes = 0
        private(set) var count = 0
        private(set) var ending: [UInt8]?
        private var framing: [ByteBuffer]?

        init(_ entries: [Entry], filter: StreamFilter, after: UInt64) {
            var matched: [ByteBuffer] = []
            for entry in entries where entry.number > after {
                switch entry.content {
                case .events(let events):
                    for event in events where filter.passes(event) { matched.append(event.frame) }
                case .finish(let frame):
                    ending = frame
                case .heartbeat:
                    matched.append(SSEFrame.heartbeatBuffer)
                case .join, .leave:
                    break
                }
                if ending != nil { break }
            }
            count = matched.count
            frames = Self.pieces(matched)
            bytes = frames.reduce(0) { $0 + $1.readableBytes }
        }

        /// The frames as `frame` frames them (all of the turn's sinks frame them alike): made once,
        /// by the first sink to ask.
        func framed(by frame: ([ByteBuffer], Int) -> [ByteBuffer]) -> [ByteBuffer] {
            if let framing { return framing }
            let made = frame(frames, bytes)
            framing = made
            return made
        }

        /// Frames up to this many bytes are joined with their neighbours; larger ones go as they are.
        static let joinLimit = 4096

        /// Frames as pieces to write: each run of small frames joined into one buffer (one copy,
        /// shared by every stream of the filter), a frame past ``joinLimit`` kept as the shared
        /// frame itself (never copied, however many filters take it).
        static func pieces(_ frames: [ByteBuffer]) -> [ByteBuffer] {
            guard frames.count > 1 else { return frames }
            var pieces: [ByteBuffer] = []
            var run: [ByteBuffer] = []
            func closeRun() {
                if run.count == 1 { pieces.append(run[0]) } else if !run.isEmpty { pieces.append(EventStream.joined(run) ?? ByteBuffer()) }
                run = []
            }
            for frame in frames {
                if frame.readableBytes > joinLimit {
                    closeRun()
                    pieces.append(frame)
                } else {
                    run.append(frame)
                }
            }
            closeRun()
            return pieces
        }
    }

    /// A feed's streams, on its loop. Streams with the same filter (collections and id) share a
    /// group: a turn's frames are routed and joined once per group.
    final class Members {
        struct Member {
            let stream: EventStream
            /// It takes the entries after this one (the last before its `join` that carries
            /// something).
            let from: UInt64
            let group: Int
        }

        struct GroupKey: Hashable {
            let collections: Set<String>?
            let documentID: String?
        }

        /// The members, contiguous (a turn walks them all), and where each is.
        private var all: [Member] = []
        private var index: [ObjectIdentifier: Int] = [:]
        private var groups: [GroupKey: (id: Int, count: Int)] = [:]
        private var nextGroup = 0

        private func add(_ stream: EventStream, from: UInt64) {
            // A stream joins once (``Session``'s books say where it is); a second join is ignored.
            guard index[ObjectIdentifier(stream)] == nil else { return }
            let key = GroupKey(collections: stream.filter.collections, documentID: stream.filter.documentID)
            let group: Int
            if let held = groups[key] {
                group = held.id
                groups[key] = (held.id, held.count + 1)
            } else {
                group = nextGroup
                nextGroup += 1
                groups[key] = (group, 1)
            }
            index[ObjectIdentifier(stream)] = all.count
            all.append(Member(stream: stream, from: from, group: group))
        }

        var count: Int { all.count }

        private func remove(_ id: ObjectIdentifier) {
            guard let at = index.removeValue(forKey: id) else { return }
            let member = all[at]
            let last = all.count - 1
            if at != last {
                all[at] = all[last]
                index[ObjectIdentifier(all[at].stream)] = at
            }
            all.removeLast()
            let key = GroupKey(collections: member.stream.filter.collections, documentID: member.stream.filter.documentID)
            guard let held = groups[key] else { return }
            groups[key] = held.count > 1 ? (held.id, held.count - 1) : nil
        }

        /// The entries (`first` the number of the first) to every member: the streams that join
        /// or leave first (in order; one that joins starts, and takes only the entries after its
        /// join), then each group's frames routed once (a member that joined in this turn routes
        /// its own), handed to the member's writer, or kept in its buffer until it has one.
        func route(_ entries: [Entry], first: UInt64) {
            var carries = false
            // A stream takes the entries after the last one that carries something before its
            // join: streams that join ahead of a turn's first content share its routing.
            var lastContent = first - 1
            for entry in entries {
                switch entry.content {
                case .join(let stream, let prelude):
                    add(stream, from: lastContent)
                    if let prelude { stream.start(with: prelude) }
                case .leave(let id):
                    remove(id)
                case .events, .finish, .heartbeat:
                    carries = true
                    lastContent = entry.number
                }
            }
            // A turn of joins and leaves alone (readers opening) walks no member.
            guard carries else { return }
            var shared: [Int: Turn] = [:]
            // The last group's, without a lookup (most members of a feed share one filter).
            var last: (group: Int, turn: Turn)?
            // Live queries' writers woken by this turn, rung once for all of them.
            var wakeups = Wakeups()
            defer { wakeups.ring() }
            for member in all {
                if member.stream.filter.takesEventsOneByOne {
                    Self.deliver(entries, after: member.from, to: member.stream, into: &wakeups)
                    continue
                }
                let turn: Turn
                if member.from >= first {
                    turn = Turn(entries, filter: member.stream.filter, after: member.from)
                } else if let last, last.group == member.group {
                    turn = last.turn
                } else if let known = shared[member.group] {
                    turn = known
                    last = (member.group, known)
                } else {
                    turn = Turn(entries, filter: member.stream.filter, after: 0)
                    shared[member.group] = turn
                    last = (member.group, turn)
                }
                if turn.count > 0 {
                    if let writer = member.stream.writer {
                        writer.value.feed(member.stream, turn)
                    } else {
                        _ = member.stream.offer(turn.frames, bytes: turn.bytes, count: turn.count, writable: false)
                    }
                }
                if let ending = turn.ending { member.stream.finish(with: ending) }
            }
        }

        /// A live query's stream takes the turn's events one by one
        /// (``EventStream/deliver(_:into:)``): each change is matched against the ids the
        /// stream holds and becomes `added`, itself, `removed` or nothing. The matching runs
        /// here, on the reader's loop, not on the loop that reads the upstream.
        private static func deliver(_ entries: [Entry], after: UInt64, to stream: EventStream, into wakeups: inout Wakeups) {
            for entry in entries where entry.number > after {
                switch entry.content {
                case .events(let events):
                    for event in events { stream.deliver(event, into: &wakeups) }
                case .heartbeat:
                    stream.enqueue(SSEFrame.heartbeatBuffer, into: &wakeups)
                case .finish(let frame):
                    stream.finish(with: frame)
                    return
                case .join, .leave:
                    continue
                }
            }
        }
    }
}
