extension Session {
    /// The part of the configuration every session is made with, a user's and a public pool
    /// connection's alike.
    struct Settings: Sendable, Equatable {
        /// Its upstream connection's.
        var upstream: UpstreamSettings
        /// Changes closer together than this are consolidated per document before streams see them.
        var batchWindow: Duration
        /// Events, and bytes of events, kept for streams that resume with `Last-Event-ID`.
        var eventLogSize: Int
        var eventLogBytes: Int
        /// A session with no request and no open stream for this long is closed.
        var idleTimeout: Duration
        /// How long an unused shared subscription is kept before it is stopped upstream.
        var subscriptionLinger: Duration
        /// Bytes a subscription's name and params may take as JSON.
        var maxSubscriptionParamsSize: Int
        /// How long a snapshot's walk may take.
        var queryTimeBudget: Duration
    }

    /// Subscriptions and open streams one session may hold: a user's
    /// (`--max-subscriptions-per-session`, `--max-streams-per-session`), or a public pool
    /// connection's.
    struct Limits: Sendable, Equatable {
        var subscriptions: Int
        var streams: Int
    }
}
