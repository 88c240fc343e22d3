extension SessionRegistry {
    /// The part of the configuration the registry uses: what its sessions are made with and may
    /// hold, how many there may be and how fast they come, and where they are kept.
    struct Settings: Sendable {
        /// Every session's, and what a user's session may hold.
        var session: Session.Settings
        var sessionLimits: Session.Limits
        /// Who a request's client is, for the per-address limits.
        var clients: ClientIdentity
        /// The memory budget the sessions' documents are charged to.
        var budget: MemoryBudget.Settings
        /// Sessions in all and per client, MCP sessions included.
        var maxSessions: Int
        var maxSessionsPerAddress: Int
        /// Failed logins, and session creations, per client and interval.
        var loginRateLimit: (calls: Int, interval: Duration)
        var sessionRateLimit: (calls: Int, interval: Duration)
        /// How long a stored session being resumed waits for the upstream, and for its login and
        /// subscriptions.
        var connectTimeout: Duration
        var requestTimeout: Duration
        /// Comment lines on idle streams.
        var heartbeatInterval: Duration
        /// On shutdown, how long requests in flight get before sessions are closed under them.
        var shutdownGrace: Duration
        /// Reconnect attempts per second across all sessions, after a burst.
        var reconnectRate: Double
        var reconnectBurst: Int
        /// Where sessions are kept besides memory (only with a `sessionKey`), and how the store is
        /// waited for and checked.
        var sessionStore: SessionStoreChoice
        var sessionKey: SessionKey?
        var dataDirectory: String
        var storeTimeout: Duration
        var storeCheckInterval: Duration
    }
}
