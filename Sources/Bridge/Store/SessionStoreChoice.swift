public import BridgeStore

/// Where the bridge keeps its sessions: in memory only, or also in a store (SQLite by default,
/// PostgreSQL for replicas). A store needs a session key: without one, nothing is written.
public enum SessionStoreChoice: Sendable, Equatable, CustomStringConvertible {
    case memory
    case sqlite
    case postgres(PostgresLocation)

    public var description: String {
        switch self {
        case .memory: "memory"
        case .sqlite: "sqlite"
        case .postgres(let location): location.description
        }
    }
}
