import Foundation
import Logging
import PostgresNIO

/// The session store replicas share: one table in PostgreSQL, through postgres-nio's client
/// (a small pool it runs itself, reconnecting on its own). Chosen with
/// `--session-store postgres://user:password@host:port/database[?sslmode=disable|prefer|require]`.
package final class PostgresSessionStore: SessionStore {
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let location: PostgresLocation
    let logger: Logger

    package init(location: PostgresLocation, logger: Logger) {
        self.location = location
        var configuration = PostgresClient.Configuration(
            host: location.host, port: location.port, username: location.username, password: location.password,
            database: location.database, tls: location.tls)
        configuration.options.connectTimeout = .seconds(3)
        configuration.options.maximumConnections = 4
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let client = PostgresClient(configuration: configuration, backgroundLogger: quiet)
        self.client = client
        self.logger = quiet
        // Detached: a task made here would inherit the service group's graceful-shutdown handler, and the
        // pool would close when shutdown begins — before the last saves of the sessions.
        self.runner = Task.detached { await client.run() }
    }

    private static func parameter(_ n: Int) -> String { "$\(n)" }

    private func run(_ sql: String, _ fill: (inout PostgresBindings) -> Void) async throws -> PostgresRowSequence {
        var binds = PostgresBindings()
        fill(&binds)
        return try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
    }

    /// Two replicas starting together race in `CREATE TABLE IF NOT EXISTS` (PostgreSQL may then
    /// refuse one with a duplicate type): the loser tries again.
    package func prepare() async throws {
        try await checkConnection()
        var attempt = 0
        while true {
            do {
                _ = try await run(SessionTable.create) { _ in }
                return
            } catch {
                attempt += 1
                guard attempt < 3 else { throw error }
                try await Task.sleep(for: .milliseconds(100 * attempt))
            }
        }
    }

    /// The pool retries a refused connection quietly, so a wrong password or database looked like
    /// a store that "did not answer in time". One direct connection first says what is wrong.
    private func checkConnection() async throws {
        var configuration = PostgresConnection.Configuration(
            host: location.host, port: location.port, username: location.username, password: location.password,
            database: location.database, tls: try location.connectionTLS())
        configuration.options.connectTimeout = .seconds(2)
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
            try? await connection.close()
        } catch let error as PSQLError {
            throw SessionStoreError.refused(Self.describe(error))
        }
    }

    /// What PostgreSQL said (its message and SQLSTATE: never the password), or why it could not be reached.
    static func describe(_ error: PSQLError) -> String {
        if let message = error.serverInfo?[.message] {
            return "PostgreSQL refused the connection: \(message)" + (error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? "")
        }
        return "PostgreSQL could not be reached (\(error.code))" + (error.underlying.map { ": \($0)" } ?? "")
    }

    package func save(_ session: StoredSession) async throws {
        _ = try await run(SessionTable.upsert(Self.parameter)) { binds in
            binds.append(session.tokenHash)
            binds.append(session.version)
            binds.append(session.clientAddress)
            if let user = session.userID { binds.append(user) } else { binds.appendNull() }
            if let sealed = session.sealedLogin { binds.append(sealed) } else { binds.appendNull() }
            binds.append(Int64(session.bridgeLogin ? 1 : 0))
            binds.append(session.subscriptionsText)
            binds.append(session.expiresAt)
            binds.append(session.createdAt)
        }
    }

    package func load(tokenHash: String) async throws -> StoredSession? {
        let rows = try await run(SessionTable.select(Self.parameter)) { $0.append(tokenHash) }
        for try await row in rows {
            let (hash, version, address, user, sealed, bridgeLogin, subscriptionsText, expiresAt, ended, createdAt) = try row.decode(
                (String, Int64, String, String?, String?, Int64, String, Int64, String?, Int64).self)
            guard let subscriptions = StoredSession.subscriptions(from: subscriptionsText) else { throw SessionStoreError.corruptRow(tokenHash) }
            return StoredSession(
                tokenHash: hash, version: version, clientAddress: address, userID: user, sealedLogin: sealed, bridgeLogin: bridgeLogin != 0,
                subscriptions: subscriptions, expiresAt: expiresAt, ended: ended, createdAt: createdAt)
        }
        return nil
    }

    package func end(tokenHash: String, reason: String, onlyIfExpiredBy: Int64?, now: Int64) async throws {
        _ = try await run(SessionTable.end(Self.parameter)) { binds in
            binds.append(reason)
            binds.append(tokenHash)
            if let bound = onlyIfExpiredBy { binds.append(bound) } else { binds.appendNull() }
            binds.append(now)
        }
    }

    package func purge(before: Int64) async throws {
        _ = try await run(SessionTable.purge(Self.parameter)) { $0.append(before) }
    }

    package func shutdown() async {
        runner.cancel()
        await runner.value
    }
}
