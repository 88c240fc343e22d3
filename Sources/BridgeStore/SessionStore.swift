import DDP
import Foundation

/// What a session store keeps of one session, so that it can be resumed after a restart or by
/// another replica: never the bridge token (only its digest), and the Meteor resume token only
/// sealed with the session key.
package struct StoredSession: Sendable, Equatable {
    /// SHA-256 of the bridge token (`SessionToken.hash(_:)` in Bridge): the row's key.
    package var tokenHash: String
    /// Grows with every save of the session; a save never overwrites a newer one.
    package var version: Int64
    package var clientAddress: String
    package var userID: String?
    /// The Meteor resume token, sealed (`SessionKey`, in Bridge) and base64-encoded.
    package var sealedLogin: String?
    /// The bridge logged in with a password (so the session's end logs out upstream).
    package var bridgeLogin: Bool
    package var subscriptions: [StoredSubscription]
    /// Milliseconds since 1970 after which the session is idle for good.
    package var expiresAt: Int64
    /// Why the session ended, for a tombstone (later requests with its token get 401 with it).
    package var ended: String?
    /// When the session was made (ms since 1970), as `GET /v1/session` reports it.
    package var createdAt: Int64

    package init(
        tokenHash: String, version: Int64, clientAddress: String, userID: String?, sealedLogin: String?, bridgeLogin: Bool,
        subscriptions: [StoredSubscription], expiresAt: Int64, ended: String?, createdAt: Int64
    ) {
        self.tokenHash = tokenHash
        self.version = version
        self.clientAddress = clientAddress
        self.userID = userID
        self.sealedLogin = sealedLogin
        self.bridgeLogin = bridgeLogin
        self.subscriptions = subscriptions
        self.expiresAt = expiresAt
        self.ended = ended
        self.createdAt = createdAt
    }

    /// The subscriptions as stored: an EJSON array of `{id, name, params, refs}`.
    package var subscriptionsText: String {
        EJSON.array(subscriptions.map { ["id": .string($0.id), "name": .string($0.name), "params": .array($0.params), "refs": .int($0.refs)] })
            .description
    }

    /// Reads the stored subscriptions back; `nil` when the text is not what ``subscriptionsText`` writes.
    package static func subscriptions(from text: String) -> [StoredSubscription]? {
        guard let parsed = try? EJSONParser.parse(text), case .array(let items) = parsed, items.count <= 100_000 else { return nil }
        var out: [StoredSubscription] = []
        for item in items {
            guard case .string(let id)? = item["id"], case .string(let name)? = item["name"], case .array(let params)? = item["params"],
                let refs = item["refs"]?.intValue, refs > 0
            else { return nil }
            out.append(StoredSubscription(id: id, name: name, params: params, refs: min(refs, 1_000_000)))
        }
        return out
    }

    package static func milliseconds(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        return value.isFinite ? Int64(clamping: Int(exactly: min(max(value, 0), 1e15)) ?? 0) : 0
    }
}

/// One subscription of a stored session, resubscribed when the session is resumed.
package struct StoredSubscription: Sendable, Equatable {
    package var id: String
    package var name: String
    package var params: [EJSON]
    package var refs: Int

    package init(id: String, name: String, params: [EJSON], refs: Int) {
        self.id = id
        self.name = name
        self.params = params
        self.refs = refs
    }
}

/// Where sessions are kept between lives of the bridge: one protocol, an embedded SQLite file
/// (``SQLiteSessionStore``) and a PostgreSQL table shared by replicas (``PostgresSessionStore``).
/// Every call may fail (the store is down, the file is corrupt); `SessionPersistence` (in Bridge) turns
/// failures into warnings and a metric, never a user's error.
package protocol SessionStore: Sendable {
    /// Creates the table when it is missing.
    func prepare() async throws
    /// Writes the session unless the stored row is newer or ended.
    func save(_ session: StoredSession) async throws
    func load(tokenHash: String) async throws -> StoredSession?
    /// Marks the session ended (a tombstone keeping `reason`), unless `onlyIfExpiredBy` is given
    /// and the stored deadline is later than it (another replica kept the session alive).
    func end(tokenHash: String, reason: String, onlyIfExpiredBy: Int64?, now: Int64) async throws
    /// Forgets rows whose deadline passed before `before` (ended ones included).
    func purge(before: Int64) async throws
    /// Lets go of connections and files.
    func shutdown() async
}

/// The SQL both stores share: one table, written by upsert that keeps the newest version.
enum SessionTable {
    static let name = "ddp_bridge_sessions"

    static let create = """
        CREATE TABLE IF NOT EXISTS ddp_bridge_sessions (
            token_hash TEXT PRIMARY KEY,
            version BIGINT NOT NULL,
            client_address TEXT NOT NULL,
            user_id TEXT,
            sealed_login TEXT,
            bridge_login BIGINT NOT NULL,
            subscriptions TEXT NOT NULL,
            expires_at BIGINT NOT NULL,
            ended TEXT,
            created_at BIGINT NOT NULL
        )
        """

    /// Parameters 1…9 in the column order of ``create`` (`ended` is always NULL here).
    static func upsert(_ p: (Int) -> String) -> String {
        """
        INSERT INTO ddp_bridge_sessions (token_hash, version, client_address, user_id, sealed_login, bridge_login, subscriptions, expires_at, ended, created_at)
        VALUES (\(p(1)), \(p(2)), \(p(3)), \(p(4)), \(p(5)), \(p(6)), \(p(7)), \(p(8)), NULL, \(p(9)))
        ON CONFLICT (token_hash) DO UPDATE SET version = excluded.version, client_address = excluded.client_address,
            user_id = excluded.user_id, sealed_login = excluded.sealed_login, bridge_login = excluded.bridge_login,
            subscriptions = excluded.subscriptions, expires_at = excluded.expires_at
        WHERE ddp_bridge_sessions.version < excluded.version AND ddp_bridge_sessions.ended IS NULL
        """
    }

    static func select(_ p: (Int) -> String) -> String {
        """
        SELECT token_hash, version, client_address, user_id, sealed_login, bridge_login, subscriptions, expires_at, ended, created_at
        FROM ddp_bridge_sessions WHERE token_hash = \(p(1))
        """
    }

    /// Parameters: reason, token hash, the deadline bound (NULL: end it whatever its deadline),
    /// now (the tombstone's own deadline, so it is purged in its turn).
    static func end(_ p: (Int) -> String) -> String {
        """
        UPDATE ddp_bridge_sessions SET ended = \(p(1)), sealed_login = NULL, subscriptions = '[]', expires_at = \(p(4))
        WHERE token_hash = \(p(2)) AND ended IS NULL AND (CAST(\(p(3)) AS BIGINT) IS NULL OR expires_at <= CAST(\(p(3)) AS BIGINT))
        """
    }

    static func purge(_ p: (Int) -> String) -> String {
        "DELETE FROM ddp_bridge_sessions WHERE expires_at < \(p(1))"
    }
}
