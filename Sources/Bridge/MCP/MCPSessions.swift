import DDP

/// The MCP sessions the bridge holds (`Mcp-Session-Id`): who opened each (the SHA-256 of its
/// credential, or none), from which address, the version it negotiated, and when it was last
/// used. A session is small (no upstream connection of its own: a signed-in agent's calls go
/// through its user's bridge session, as REST calls do), but each is still bounded: in all
/// (`--mcp-max-sessions`), per address (`--max-sessions-per-address`, as bridge sessions), and
/// by idleness (`--session-idle-timeout`: an idle one is dropped when a new one needs room or
/// when it is next used). The book is a value (``Book``, pure); ``MCPSessions`` holds it under a
/// lock.
final class MCPSessions: Sendable {
    struct Entry: Sendable {
        let id: String
        /// The SHA-256 of the credential that opened it; `nil` for an agent without one.
        let owner: String?
        let address: ClientKey
        let version: String
        var lastUsed: ContinuousClock.Instant
        /// The resources it subscribed to, and its server stream.
        var watch: MCPWatch
    }

    /// Why a session could not be opened or used.
    enum Refusal: Error, Equatable {
        /// No such session (never opened, ended, or dropped when idle): the client opens a new one.
        case unknown
        /// Another credential's session.
        case notYours
        case tooMany(perAddress: Bool)
    }

    struct Book: Sendable {
        let maxSessions: Int
        let maxPerAddress: Int
        let idleTimeout: Duration
        private(set) var entries: [String: Entry] = [:]
        private var perAddress: [ClientKey: Int] = [:]
        private var anonymous = 0
        /// Sessions without a credential hold at most a quarter of the places: they cost nothing
        /// to open, and must not keep signed-in agents out.
        var maxAnonymous: Int { max(1, maxSessions / 4) }
        /// Sessions ended by the book (idle, or closed), whose server streams the shell ends.
        private(set) var ended: [Entry] = []

        init(maxSessions: Int, maxPerAddress: Int, idleTimeout: Duration) {
            self.maxSessions = maxSessions
            self.maxPerAddress = maxPerAddress
            self.idleTimeout = idleTimeout
        }

        var count: Int { entries.count }

        /// Opens a session; idle ones are dropped first when the bounds are reached.
        mutating func open(_ entry: Entry, now: ContinuousClock.Instant) throws(Refusal) {
            let signedOut = entry.owner == nil
            if entries.count >= maxSessions || perAddress[entry.address, default: 0] >= maxPerAddress || (signedOut && anonymous >= maxAnonymous) {
                dropIdle(now: now)
            }
            guard entries.count < maxSessions, !signedOut || anonymous < maxAnonymous else { throw .tooMany(perAddress: false) }
            guard perAddress[entry.address, default: 0] < maxPerAddress else { throw .tooMany(perAddress: true) }
            entries[entry.id] = entry
            perAddress[entry.address, default: 0] += 1
            if signedOut { anonymous += 1 }
        }

        /// Whether a session is idle: unused for the idle timeout, and not listening on its
        /// server stream.
        private func isIdle(_ entry: Entry, now: ContinuousClock.Instant) -> Bool {
            now - entry.lastUsed >= idleTimeout && !entry.watch.isStreamOpen
        }

        /// The session `id`, used now by `owner`.
        mutating func use(_ id: String, owner: String?, now: ContinuousClock.Instant) throws(Refusal) -> Entry {
            guard var entry = entries[id] else { throw .unknown }
            guard !isIdle(entry, now: now) else {
                remove(id)
                throw .unknown
            }
            guard entry.owner == owner else { throw .notYours }
            entry.lastUsed = now
            entries[id] = entry
            return entry
        }

        /// Ends the session `id` of `owner`.
        mutating func close(_ id: String, owner: String?) throws(Refusal) {
            guard let entry = entries[id] else { throw .unknown }
            guard entry.owner == owner else { throw .notYours }
            remove(id)
        }

        /// Drops the idle sessions now (before a new one takes a place).
        mutating func dropIdleNow(now: ContinuousClock.Instant) { dropIdle(now: now) }

        private mutating func dropIdle(now: ContinuousClock.Instant) {
            for (id, entry) in entries where isIdle(entry, now: now) { remove(id) }
        }

        private mutating func remove(_ id: String) {
            guard let entry = entries.removeValue(forKey: id) else { return }
            let left = perAddress[entry.address, default: 1] - 1
            perAddress[entry.address] = left > 0 ? left : nil
            if entry.owner == nil { anonymous -= 1 }
            ended.append(entry)
        }

        /// The sessions ended since the last call, taken.
        mutating func takeEnded() -> [Entry] {
            defer { ended = [] }
            return ended
        }
    }

    private let book: LockedState<Book>
    /// At most one notification per resource per this long (``MCPWatch``).
    let notifyInterval: Duration
    /// Where each session's memory is charged, to its address: its place (``baseCost``) from
    /// open to end, and each resource it watches (``MCPWatch/cost(of:)``). `nil`: not charged.
    private let budget: MemoryBudget?
    /// What a session costs the memory budget before it watches anything: its entry and watch.
    static let baseCost = 1024
    /// Where each MCP session holds its place among the bridge's sessions (in all and per
    /// address): taken as it opens, given back as it ends. `nil`: the book's bounds alone.
    private let places: (take: @Sendable (ClientKey) throws(BridgeError) -> Void, release: @Sendable (ClientKey) -> Void)?

    init(
        maxSessions: Int, maxPerAddress: Int, idleTimeout: Duration, notifyInterval: Duration = .seconds(1),
        places: (take: @Sendable (ClientKey) throws(BridgeError) -> Void, release: @Sendable (ClientKey) -> Void)? = nil,
        budget: MemoryBudget? = nil
    ) {
        book = LockedState(Book(maxSessions: maxSessions, maxPerAddress: maxPerAddress, idleTimeout: idleTimeout))
        self.notifyInterval = notifyInterval
        self.places = places
        self.budget = budget
    }

    /// Charges `bytes` to `address` (a session without a credential: its anonymous share); gives
    /// them back and throws the refusal when the budget or the address's share is past its bound.
    private func charge(_ bytes: Int, to address: ClientKey, anonymous: Bool) throws(BridgeError) {
        guard let budget else { return }
        if let refusal = budget.refusal(budget.charge(address, bytes, anonymous: anonymous), anonymous: anonymous) {
            budget.charge(address, -bytes, anonymous: anonymous)
            throw refusal
        }
    }

    private func giveBack(_ bytes: Int, from address: ClientKey, anonymous: Bool) {
        guard bytes > 0 else { return }
        budget?.charge(address, -bytes, anonymous: anonymous)
    }

    /// The session `entry` watches `uri` (again is fine), charged to its address; `false` past
    /// ``MCPWatch/limit``. Throws the budget's refusal.
    func watch(_ uri: String, _ resource: MCPResource, for entry: Entry) throws(BridgeError) -> Bool {
        let cost = MCPWatch.cost(of: uri)
        try charge(cost, to: entry.address, anonymous: entry.owner == nil)
        let added = entry.watch.add(uri, resource)
        if added != .added { giveBack(cost, from: entry.address, anonymous: entry.owner == nil) }
        return added != .refused
    }

    /// The session `entry` no longer watches `uri`; its charge is given back.
    func unwatch(_ uri: String, for entry: Entry) {
        giveBack(entry.watch.remove(uri), from: entry.address, anonymous: entry.owner == nil)
    }

    var count: Int { book.withLock { $0.count } }

    /// Opens a session and returns its id (a secret as Meteor makes them: 43 characters of
    /// the URL-safe base64 alphabet, 256 bits).
    /// Opens a session (its place among the bridge's sessions taken first: a refusal there is
    /// the bridge's own error) and returns its id.
    func open(owner: String?, address: ClientKey, version: String, now: ContinuousClock.Instant) throws -> String {
        let id = MeteorRandom.secret()
        let entry = Entry(id: id, owner: owner, address: address, version: version, lastUsed: now, watch: MCPWatch(interval: notifyInterval))
        defer { endStreams() }
        // Idle sessions go first, so their places are free for this one.
        book.withLock { $0.dropIdleNow(now: now) }
        endStreams()
        try places?.take(address)
        do {
            try charge(Self.baseCost, to: address, anonymous: owner == nil)
        } catch {
            places?.release(address)
            throw error
        }
        do {
            try book.withLock { book throws(Refusal) in try book.open(entry, now: now) }
        } catch {
            places?.release(address)
            giveBack(Self.baseCost, from: address, anonymous: owner == nil)
            throw error
        }
        return id
    }

    func use(_ id: String, owner: String?, now: ContinuousClock.Instant) throws(Refusal) -> Entry {
        defer { endStreams() }
        return try book.withLock { book throws(Refusal) in try book.use(id, owner: owner, now: now) }
    }

    func close(_ id: String, owner: String?) throws(Refusal) {
        defer { endStreams() }
        try book.withLock { book throws(Refusal) in try book.close(id, owner: owner) }
    }

    /// The sessions the book ended: their server streams ended and their places given back
    /// (outside its lock).
    private func endStreams() {
        for entry in book.withLock({ $0.takeEnded() }) {
            entry.watch.end()
            places?.release(entry.address)
            giveBack(Self.baseCost + entry.watch.release(), from: entry.address, anonymous: entry.owner == nil)
        }
    }
}
