import BridgeStore
public import DDP

/// A subscription as REST lists it.
public struct SubscriptionInfo: Sendable, Equatable {
    public enum State: String, Sendable { case pending, ready }

    public let id: String
    public let name: String
    public let params: [EJSON]
    public var state: State
    /// How many subscribe calls share it.
    public var refs: Int

    public var ejson: EJSON {
        ["id": .string(id), "name": .string(name), "params": .array(params), "state": .string(state.rawValue), "refs": .int(refs)]
    }
}

/// The upstream subscriptions of one session, shared by identical name and params,
/// counted, and released only after a linger so a quick re-subscribe costs nothing.
struct SharedSubscriptions: Sendable {
    struct Entry: Sendable {
        var info: SubscriptionInfo
        let key: String
        var releaseAt: ContinuousClock.Instant?
        /// References held by event streams for their own lifetime (not kept by a session store).
        var transient = 0
    }

    private(set) var entries: [String: Entry] = [:]
    private var byKey: [String: String] = [:]
    private var order: [String] = []

    static func key(_ name: String, _ params: [EJSON]) -> String { name + "\u{0}" + EJSON.array(params).description }

    var count: Int { entries.count }

    /// The subscription for a key (referenced or lingering), if any.
    func id(forKey key: String) -> String? { byKey[key].flatMap { entries[$0] == nil ? nil : $0 } }

    /// Takes a reference to the subscription for name and params; `isNew` when it must be started upstream.
    /// `transient`: a reference an event stream holds while it is open.
    mutating func acquire(_ name: String, _ params: [EJSON], transient: Bool = false, newID: () -> String) -> (id: String, isNew: Bool) {
        let key = Self.key(name, params)
        if let id = byKey[key], entries[id] != nil {
            entries[id]!.info.refs += 1
            if transient { entries[id]!.transient += 1 }
            entries[id]!.releaseAt = nil
            return (id, false)
        }
        let id = newID()
        entries[id] = Entry(
            info: SubscriptionInfo(id: id, name: name, params: params, state: .pending, refs: 1), key: key, releaseAt: nil,
            transient: transient ? 1 : 0)
        byKey[key] = id
        order.append(id)
        return (id, true)
    }

    /// Drops one reference; the last one schedules the release. `false` when the id is unknown.
    mutating func release(_ id: String, at deadline: ContinuousClock.Instant, transient: Bool = false) -> Bool {
        guard entries[id] != nil else { return false }
        entries[id]!.info.refs = max(0, entries[id]!.info.refs - 1)
        if transient { entries[id]!.transient = max(0, entries[id]!.transient - 1) }
        if entries[id]!.info.refs == 0 { entries[id]!.releaseAt = deadline }
        return true
    }

    /// Takes `refs` references under a known id (a session resumed from its store); `false` when
    /// the id or the name and params are taken already.
    mutating func restore(id: String, name: String, params: [EJSON], refs: Int) -> Bool {
        let key = Self.key(name, params)
        guard entries[id] == nil, byKey[key] == nil, refs > 0 else { return false }
        entries[id] = Entry(info: SubscriptionInfo(id: id, name: name, params: params, state: .pending, refs: refs), key: key, releaseAt: nil)
        byKey[key] = id
        order.append(id)
        return true
    }

    /// What a session store keeps: the references taken by calls, not those of open streams.
    var durable: [StoredSubscription] {
        order.compactMap { entries[$0] }.compactMap { entry in
            let refs = entry.info.refs - entry.transient
            return refs > 0 ? StoredSubscription(id: entry.info.id, name: entry.info.name, params: entry.info.params, refs: refs) : nil
        }
    }

    /// Drops every reference to subscriptions of that name; returns how many there were.
    mutating func releaseAll(named name: String, at deadline: ContinuousClock.Instant) -> Int {
        let ids = entries.values.filter { $0.info.name == name && $0.info.refs > 0 }.map(\.info.id)
        for id in ids {
            entries[id]!.info.refs = 0
            entries[id]!.transient = 0
            entries[id]!.releaseAt = deadline
        }
        return ids.count
    }

    /// Subscriptions whose linger is over: removed here, to be stopped upstream.
    mutating func takeExpired(now: ContinuousClock.Instant) -> [String] {
        let expired = entries.values.filter { entry in entry.releaseAt.map { $0 <= now } ?? false }.map(\.info.id)
        for id in expired { remove(id) }
        return expired
    }

    mutating func markReady(_ id: String) { entries[id]?.info.state = .ready }

    mutating func remove(_ id: String) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        if byKey[entry.key] == id { byKey[entry.key] = nil }
        order.removeAll { $0 == id }
    }

    /// Live subscriptions (still referenced), oldest first.
    var list: [SubscriptionInfo] {
        order.compactMap { entries[$0] }.filter { $0.info.refs > 0 }.map(\.info)
    }
}
