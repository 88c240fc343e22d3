import DDP
import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLiteNIO

#if canImport(Glibc)
    import Glibc
#endif

/// The embedded session store: one SQLite file (`sessions.sqlite` under the data directory), in
/// WAL mode, through sqlite-nio (its own thread pool; SQLite serialises writers).
package final class SQLiteSessionStore: SessionStore {
    let path: String
    private let connection: SQLiteConnection
    private let threadPool: NIOThreadPool

    private init(path: String, connection: SQLiteConnection, threadPool: NIOThreadPool) {
        self.path = path
        self.connection = connection
        self.threadPool = threadPool
    }

    /// Opens (creating when missing) the database file under `folder`.
    ///
    /// The store has a thread of its own: a call waiting on the file's lock (`busy_timeout`, while
    /// another process holds it) blocks that thread, and on the process-wide pool (two threads on
    /// two cores) it held up every other user of that pool.
    package static func open(folder: String, busyTimeout: Duration = .seconds(2), logger: Logger) async throws -> SQLiteSessionStore {
        let path = try preparePath(folder: folder)
        let threadPool = NIOThreadPool(numberOfThreads: 1)
        threadPool.start()
        let connection: SQLiteConnection
        do {
            connection = try await SQLiteConnection.open(
                storage: .file(path: path), threadPool: threadPool, logger: logger, on: MultiThreadedEventLoopGroup.singleton.any())
        } catch {
            try? await threadPool.shutdownGracefully()
            throw error
        }
        let store = SQLiteSessionStore(path: path, connection: connection, threadPool: threadPool)
        do {
            // Another process on the same file (an old container still stopping) waits, not fails.
            let milliseconds = min(max(1, busyTimeout.wholeMilliseconds), Int64(Int32.max))
            _ = try await connection.query("PRAGMA busy_timeout = \(milliseconds)", [])
            _ = try await connection.query("PRAGMA journal_mode = WAL", [])
            try await store.prepare()
        } catch {
            await store.shutdown()
            throw error
        }
        return store
    }

    private static func parameter(_ n: Int) -> String { "?\(n)" }

    /// The database file's path, the folder and the file made for this user alone when they are
    /// new (0700 and 0600: the file holds user ids, client addresses and subscription params). A
    /// symbolic link in the file's place is refused, not followed.
    static func preparePath(folder: String) throws -> String {
        if !FileManager.default.fileExists(atPath: folder) {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let path = (folder as NSString).appendingPathComponent("sessions.sqlite")
        // attributesOfItem reads the link itself, not what it points to.
        if let type = (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType {
            guard type == .typeRegular else { throw SessionStoreError.unsafeFile(path) }
        } else {
            let descriptor = Glibc.open(path, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw SessionStoreError.unsafeFile(path) }
            close(descriptor)
        }
        return path
    }

    package func prepare() async throws {
        _ = try await connection.query(SessionTable.create, [])
        // A corrupt file can open and even create; reading it is what tells.
        _ = try await connection.query("SELECT count(*) FROM ddp_bridge_sessions", [])
    }

    package func save(_ session: StoredSession) async throws {
        _ = try await connection.query(
            SessionTable.upsert(Self.parameter),
            [
                .text(session.tokenHash), .integer(SQLiteInt64(session.version)), .text(session.clientAddress),
                session.userID.map(SQLiteData.text) ?? .null,
                session.sealedLogin.map(SQLiteData.text) ?? .null, .integer(session.bridgeLogin ? 1 : 0), .text(session.subscriptionsText),
                .integer(SQLiteInt64(session.expiresAt)), .integer(SQLiteInt64(session.createdAt))
            ])
    }

    package func load(tokenHash: String) async throws -> StoredSession? {
        let rows = try await connection.query(SessionTable.select(Self.parameter), [.text(tokenHash)])
        guard let row = rows.first else { return nil }
        // Each column read by its case: sqlite-nio's own accessors convert a float with Int64(_:), which traps out of range.
        func text(_ name: String) -> String? { if case .text(let s)? = row.column(name) { s } else { nil } }
        func integer(_ name: String) -> Int64? { if case .integer(let n)? = row.column(name) { Int64(n) } else { nil } }
        guard let hash = text("token_hash"), let version = integer("version"), let address = text("client_address"),
            let bridgeLogin = integer("bridge_login"), let subscriptionsText = text("subscriptions"),
            let subscriptions = StoredSession.subscriptions(from: subscriptionsText), let expiresAt = integer("expires_at"),
            let createdAt = integer("created_at")
        else { throw SessionStoreError.corruptRow(tokenHash) }
        return StoredSession(
            tokenHash: hash, version: version, clientAddress: address, userID: text("user_id"), sealedLogin: text("sealed_login"),
            bridgeLogin: bridgeLogin != 0, subscriptions: subscriptions, expiresAt: expiresAt, ended: text("ended"), createdAt: createdAt)
    }

    package func end(tokenHash: String, reason: String, onlyIfExpiredBy: Int64?, now: Int64) async throws {
        _ = try await connection.query(
            SessionTable.end(Self.parameter),
            [.text(reason), .text(tokenHash), onlyIfExpiredBy.map { .integer(SQLiteInt64($0)) } ?? .null, .integer(SQLiteInt64(now))])
    }

    package func purge(before: Int64) async throws {
        _ = try await connection.query(SessionTable.purge(Self.parameter), [.integer(SQLiteInt64(before))])
    }

    /// Closes the file. Through the future-based `close()`, which runs even in a cancelled task:
    /// the async one throws without closing when the task is cancelled (an open abandoned at its
    /// deadline), and a connection dropped unclosed leaks its file (sqlite-nio traps on it in
    /// debug builds: it crashed a test run).
    package func shutdown() async {
        try? await connection.close().get()
        threadPool.shutdownGracefully { _ in }
    }
}
