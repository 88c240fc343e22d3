import BridgeStore
import CoreMetrics
import DDPClient
import Foundation
import Logging
import NIOCore
import NIOPosix
import Timing

/// The session store as the registry uses it: every failure of the store (unreachable, corrupt,
/// slow) becomes a logged warning and a metric, never a user's error — sessions go on in memory.
/// Each operation has a deadline; after a failure the store is left alone for a few seconds (no
/// request waits on a store that is down), then tried again.
actor SessionPersistence {
    enum Lookup: Sendable {
        case found(StoredSession)
        case absent
        case unavailable
    }

    /// Opens a store within its deadline; a store that opens after the deadline is closed again.
    typealias Opener = @Sendable () async throws -> any SessionStore

    nonisolated let key: SessionKey
    nonisolated let name: String
    private let opener: Opener?
    private let logger: Logger
    /// Where the deadlines' timers run.
    private let loop: any EventLoop
    private let clock: BridgeClock
    private var store: (any SessionStore)?
    /// The open in progress: every caller that needs the store meanwhile waits for this one
    /// (two opens racing would leave one store unclosed).
    private var opening: Task<(any SessionStore)?, Never>?
    private var downUntil: ContinuousClock.Instant?
    private var warnedAt: ContinuousClock.Instant?
    private var isShutDown = false
    private let errors: (String) -> CoreMetrics.Counter
    private let up: CoreMetrics.Gauge

    /// Each operation's deadline (`--store-timeout`).
    private let timeout: Duration
    static let pause: Duration = .seconds(5)

    init(
        choice: SessionStoreChoice, key: SessionKey, dataDirectory: String, timeout: Duration, clock: BridgeClock, logger: Logger,
        metrics: BridgeMetrics, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        let loop = eventLoopGroup.any()
        self.init(
            name: choice.description,
            opener: Self.opener(for: choice, dataDirectory: dataDirectory, timeout: timeout, clock: clock, logger: logger, loop: loop),
            key: key, timeout: timeout, clock: clock, logger: logger, metrics: metrics, loop: loop)
    }

    init(
        name: String, opener: Opener?, key: SessionKey, timeout: Duration = .seconds(3), clock: BridgeClock = .system, logger: Logger,
        metrics: BridgeMetrics, loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()
    ) {
        self.loop = loop
        self.clock = clock
        self.timeout = timeout
        self.name = name
        self.opener = opener
        self.key = key
        self.logger = logger
        self.errors = { metrics.storeErrors(operation: $0) }
        self.up = metrics.storeUp
    }

    /// The store the application was given (``BridgeRuntime/sessionStore``), opened within the
    /// same deadline as the others; one that opens after it is closed again.
    init(
        given: @escaping Opener, key: SessionKey, timeout: Duration, clock: BridgeClock, logger: Logger, metrics: BridgeMetrics,
        loop: any EventLoop
    ) {
        self.init(
            name: "given", opener: Self.opened(within: timeout, clock: clock, on: loop, given), key: key, timeout: timeout, clock: clock,
            logger: logger, metrics: metrics, loop: loop)
    }

    /// `open` within the deadline; a store that opens after it is closed again.
    private static func opened(within timeout: Duration, clock: BridgeClock, on loop: any EventLoop, _ open: @escaping Opener) -> Opener {
        { try await withDeadline("open", timeout, clock: clock, on: loop, discardLate: { await $0.shutdown() }, open) }
    }

    private static func opener(
        for choice: SessionStoreChoice, dataDirectory: String, timeout: Duration, clock: BridgeClock, logger: Logger, loop: any EventLoop
    ) -> Opener? {
        switch choice {
        case .memory:
            return nil
        case .sqlite:
            // The file's lock is waited for up to two thirds of the deadline, so a store busy
            // with another process fails as busy, not as late.
            return opened(within: timeout, clock: clock, on: loop) {
                try await SQLiteSessionStore.open(folder: dataDirectory, busyTimeout: timeout * 2 / 3, logger: logger)
            }
        case .postgres(let location):
            return {
                let postgres = PostgresSessionStore(location: location, logger: logger)
                do {
                    try await withDeadline("open", timeout, clock: clock, on: loop) { try await postgres.prepare() }
                } catch {
                    await postgres.shutdown()
                    throw error
                }
                return postgres
            }
        }
    }

    /// Opens the store (at start; later calls open it when it is not open yet).
    func start() async {
        _ = await open()
    }

    private func open() async -> (any SessionStore)? {
        if let store { return store }
        if let opening { return await opening.value }
        guard !isShutDown, downUntil.map({ clock.now >= $0 }) ?? true, let opener else { return nil }
        let attempt = Task { await self.attemptOpen(opener) }
        opening = attempt
        let opened = await attempt.value
        opening = nil
        return opened
    }

    private func attemptOpen(_ opener: Opener) async -> (any SessionStore)? {
        do {
            let opened = try await opener()
            guard !isShutDown else {
                await opened.shutdown()
                return nil
            }
            store = opened
            up.record(1)
            logger.info("session store open", metadata: ["store": .string(name)])
            return opened
        } catch {
            failed("open", error)
            return nil
        }
    }

    private func failed(_ operation: String, _ error: any Error) {
        errors(operation).increment()
        up.record(0)
        let now = clock.now
        downUntil = now + Self.pause
        if warnedAt.map({ now - $0 >= .seconds(30) }) ?? true {
            warnedAt = now
            logger.warning(
                "the session store failed; sessions go on in memory (a restart or another replica cannot resume them until it is back)",
                metadata: ["store": .string(name), "operation": .string(operation), "error": .string(String(reflecting: error))])
        }
    }

    /// Ends the pause after a failure: the next operation tries the store.
    func tryAgainNow() { downUntil = nil }

    private func succeeded() {
        if downUntil != nil {
            downUntil = nil
            logger.notice("the session store answers again", metadata: ["store": .string(name)])
        }
        up.record(1)
    }

    /// Runs one store operation with the deadline and the failure rules; `nil` when it did not run or failed.
    private func perform<T: Sendable>(_ operation: String, _ body: @escaping @Sendable (any SessionStore) async throws -> T) async -> T? {
        guard let store = await open() else { return nil }
        if let downUntil, clock.now < downUntil { return nil }
        do {
            let value = try await Self.withDeadline(operation, timeout, clock: clock, on: loop) { try await body(store) }
            succeeded()
            return value
        } catch is CancellationError {
            return nil  // the caller went away (a request, the sweep at shutdown): not the store's fault
        } catch {
            failed(operation, error)
            return nil
        }
    }

    func load(tokenHash: String) async -> Lookup {
        guard let found = await perform("load", { try await $0.load(tokenHash: tokenHash) }) else { return .unavailable }
        return found.map(Lookup.found) ?? .absent
    }

    /// Saves a record, sealing the login token into it; `false` when the store did not take it.
    @discardableResult
    func save(_ record: StoredSession, loginToken: String?) async -> Bool {
        var record = record
        if let loginToken {
            guard let sealed = key.seal(Array(loginToken.utf8), context: Self.context(record.tokenHash)) else {
                failed("seal", SessionStoreError.corruptRow(record.tokenHash))
                return false
            }
            record.sealedLogin = Data(sealed).base64EncodedString()
        }
        return await perform("save", { [record] in try await $0.save(record) }) != nil
    }

    /// The login token a stored session holds; `nil` when it has none or it does not open with this key.
    nonisolated func loginToken(of record: StoredSession) -> String?? {
        guard let sealed = record.sealedLogin else { return .some(nil) }
        guard let data = Data(base64Encoded: sealed), let plain = key.open([UInt8](data), context: Self.context(record.tokenHash)) else {
            return nil
        }
        return .some(String(decoding: plain, as: UTF8.self))
    }

    func end(tokenHash: String, reason: String, onlyIfExpiredBy: Int64?) async {
        let now = StoredSession.milliseconds(clock.wallClock)
        _ = await perform("end", { try await $0.end(tokenHash: tokenHash, reason: reason, onlyIfExpiredBy: onlyIfExpiredBy, now: now) })
    }

    /// Forgets sessions (and tombstones) whose deadline passed more than a day ago.
    func purge() async {
        let before = StoredSession.milliseconds(clock.wallClock) - 86_400_000
        _ = await perform("purge", { try await $0.purge(before: before) })
    }

    func shutdown() async {
        isShutDown = true
        if let opening { _ = await opening.value }
        if let store { await store.shutdown() }
        store = nil
    }

    private static func context(_ tokenHash: String) -> [UInt8] { Array("ddp-bridge session \(tokenHash)".utf8) }

    /// `body`'s value within `limit` (``Timing/withDeadline(_:clock:on:discardLate:_:)``), its
    /// deadline reported as ``SessionStoreError/timedOut(_:)`` of `operation`.
    static func withDeadline<T: Sendable>(
        _ operation: String, _ limit: Duration, clock: BridgeClock = .system, on loop: any EventLoop,
        discardLate: (@Sendable (T) async -> Void)? = nil, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        do {
            return try await Timing.withDeadline(limit, clock: clock, on: loop, discardLate: discardLate, body)
        } catch DeadlineError.timedOut {
            throw SessionStoreError.timedOut(operation)
        } catch DeadlineError.cancelled {
            throw CancellationError()
        }
    }
}
