extension PublicFanout {
    /// The part of the configuration the fan-out uses: what is public, the limits on its readers
    /// and subscriptions, and what its pool connections are made with.
    struct Settings: Sendable, Equatable {
        /// Publications anyone may read without a session.
        var publications: PublicPublications
        /// What each pool connection is made with (a session's settings).
        var session: Session.Settings
        /// Upstream connections the subscriptions share; 0: one for each distinct subscription.
        var connections: Int
        /// Distinct public subscriptions at once, and how many one client address may make.
        var maxSubscriptions: Int
        var maxSubscriptionsPerAddress: Int
        /// Open public streams in all, and per client address.
        var maxReaders: Int
        var maxReadersPerAddress: Int
        /// How long a reader waits for the upstream, and for its subscription to get ready.
        var connectTimeout: Duration
        var requestTimeout: Duration
        /// Comment lines on idle streams.
        var heartbeatInterval: Duration
    }
}
