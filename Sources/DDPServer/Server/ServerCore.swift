public import DDP
import Foundation
public import Logging

/// All state of the in-process DDP server in one actor: the data, every connection's
/// merge box and subscriptions. Everything a write causes is queued to each affected
/// connection before the writing method's `updated`, which is Meteor's write fence.
public actor ServerCore {
    /// What a connection's writer sends.
    public enum Outgoing: Sendable {
        case text(String)
        /// Close the WebSocket with 1000 "Normal closure".
        case close
    }

    struct Observer {
        let connection: Int
        let subscription: String
        let cursor: Cursor
        /// Writes up to this sequence number were already published when the observer started.
        let since: Int
    }

    struct Subscription {
        let name: String
        let params: [EJSON]
        let universal: Bool
        var documents: [String: Set<String>] = [:]
        var ready = false
        var task: Task<Void, Never>?
    }

    struct Connection {
        let outbox: AsyncStream<Outgoing>.Continuation
        let clientAddress: String?
        var session: String?
        var version = ""
        var userId: String?
        var loginToken: String?
        var mergeBox = MergeBox()
        var subscriptions: [String: Subscription] = [:]
        var subscriptionOrder: [String] = []
        var lastInbound = ContinuousClock.now
        var pingSentAt: ContinuousClock.Instant?
        var rateLimited: [ContinuousClock.Instant] = []
    }

    public let configuration: DDPServerConfiguration
    let logger: Logger
    var database = Database()
    var connections: [Int: Connection] = [:]
    var observers: [String: [Observer]] = [:]
    /// Writes made inside methods, published when the method ends (before its `updated`).
    var fenced: [Database.Change] = []
    private var nextConnection = 1
    /// Whoever waits for a condition on the server's state (``waitUntil(timeout:_:)``).
    var conditionWaiters: [Int: ConditionWaiter] = [:]
    var nextConditionWaiter = 0

    public init(configuration: DDPServerConfiguration, logger: Logger = Logger(label: "ddp-server")) {
        self.configuration = configuration
        self.logger = logger
    }

    public var connectionCount: Int { connections.count }
    /// Method calls begun so far, by name (a test waits for a call to be under way).
    public internal(set) var methodsStarted: [String: Int] = [:]

    /// Subscriptions to `name` across all connections (universal ones aside), for tests that count
    /// what a client asked of the server.
    public func subscriptionCount(named name: String) -> Int {
        connections.values.reduce(0) { $0 + $1.subscriptions.values.filter { !$0.universal && $0.name == name }.count }
    }

    // MARK: - Connections

    func connectionOpened(outbox: AsyncStream<Outgoing>.Continuation, clientAddress: String?) -> Int {
        let id = nextConnection
        nextConnection += 1
        connections[id] = Connection(outbox: outbox, clientAddress: clientAddress)
        if configuration.greetsWithServerID { outbox.yield(.text(#"{"server_id":"0"}"#)) }
        stateChanged()
        return id
    }

    func connectionClosed(_ id: Int) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        for (_, sub) in connection.subscriptions { sub.task?.cancel() }
        for name in Array(observers.keys) {
            observers[name]!.removeAll { $0.connection == id }
        }
        connection.outbox.finish()
        stateChanged()
    }

    /// Closes every connection (the listener is stopping).
    public func closeAllConnections() {
        for (_, connection) in connections { connection.outbox.yield(.close) }
    }

    func send(_ id: Int, _ message: ServerMessage) {
        connections[id]?.outbox.yield(.text(String(decoding: message.encode(), as: UTF8.self)))
    }

    func close(_ id: Int) {
        connections[id]?.outbox.yield(.close)
    }

    /// Heartbeat: ping after `heartbeatInterval` of silence, close after `heartbeatTimeout` more.
    func heartbeat(_ id: Int, now: ContinuousClock.Instant) {
        guard let connection = connections[id], connection.session != nil, connection.version != "pre1" else { return }
        if let sent = connection.pingSentAt {
            if now - sent >= configuration.heartbeatTimeout { close(id) }
        } else if now - connection.lastInbound >= configuration.heartbeatInterval {
            connections[id]!.pingSentAt = now
            send(id, .ping(id: nil))
        }
    }

    // MARK: - Incoming messages

    /// Handles one frame; a connection's frames are handled one after another.
    func receive(_ id: Int, _ parsed: Result<EJSON, EJSONParseError>) async {
        guard connections[id] != nil else { return }
        defer { stateChanged() }
        connections[id]!.lastInbound = .now
        connections[id]!.pingSentAt = nil
        let value: EJSON
        switch parsed {
        case .failure:
            send(id, .error(reason: "Bad request", offendingMessage: nil))
            return
        case .success(let v): value = v
        }
        let message: ClientMessage
        do {
            guard let decoded = try ClientMessage.decode(value) else {
                send(id, .error(reason: "Bad request", offendingMessage: value))
                return
            }
            message = decoded
        } catch {
            send(id, .error(reason: error.reason, offendingMessage: value))
            return
        }
        if case .connect(let version, let support) = message {
            connect(id, version: version, support: support, offending: value)
            return
        }
        guard connections[id]?.session != nil else {
            send(id, .error(reason: "Must connect first", offendingMessage: value))
            return
        }
        switch message {
        case .connect: break
        case .ping(let pingID): send(id, .pong(id: pingID))
        case .pong: break
        case .sub(let subID, let name, let params): subscribe(id, subID, name: name, params: params)
        case .unsub(let subID): unsubscribe(id, subID)
        case .method(let methodID, let name, let params, let seed):
            await callMethod(id, methodID, name: name, params: params, randomSeed: seed?.stringValue)
        }
    }

    private func connect(_ id: Int, version: String, support: [String], offending: EJSON) {
        guard connections[id]?.session == nil else {
            send(id, .error(reason: "Already connected", offendingMessage: offending))
            return
        }
        let supported = configuration.supportedVersions
        // Meteor's calculateVersion: the client's most preferred version that we speak.
        let best = support.first { supported.contains($0) } ?? supported[0]
        guard support.contains(version), version == best else {
            send(id, .failed(version: support.contains(version) ? best : supported[0]))
            close(id)
            return
        }
        let session = MeteorRandom.id()
        connections[id]!.session = session
        connections[id]!.version = version
        send(id, .connected(session: session))
        startUniversalSubscriptions(id, silently: false)
    }
}
