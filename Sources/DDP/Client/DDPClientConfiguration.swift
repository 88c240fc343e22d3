/// The protocol settings of a DDP client connection, with Meteor's client defaults.
public struct DDPClientConfiguration: Sendable, Equatable {
    /// Versions offered, most preferred first (docs/ARCHITECTURE.md, "protocol facts").
    public var supportedVersions: [String]
    /// Silence after which the client pings (Meteor's client: 17.5 s).
    public var heartbeatInterval: Duration
    /// How long a ping may go unanswered, with nothing else received, before the link is dead (15 s).
    public var heartbeatTimeout: Duration
    public var reconnect: ReconnectPolicy
    /// How long an attempt may take from opening the transport to `connected`.
    public var connectTimeout: Duration
    /// How long a connection must stay up before the reconnect backoff starts over.
    public var healthyAfter: Duration
    /// How long the resync after a reconnect may wait for subscriptions and calls before what
    /// arrived is swapped in anyway (a view must never stay frozen).
    public var resyncTimeout: Duration
    /// Most documents the connection's cache may hold. Past it, the subscriptions still loading
    /// (or, when all are ready, the newest one) are stopped with a `too-many-documents` error,
    /// so the server removes their documents; `nil`: no limit.
    public var maxCachedDocuments: Int?
    /// A resume login the upstream refuses after a reconnect closes the connection for good
    /// (calls under way fail with `login-lost`, nothing more is sent), for an owner that must
    /// not go on without its login. Off (Meteor's client), the connection goes on anonymous.
    public var closesWhenLoginIsLost: Bool

    public init(
        supportedVersions: [String] = ["1", "pre2", "pre1"],
        heartbeatInterval: Duration = .milliseconds(17_500),
        heartbeatTimeout: Duration = .seconds(15),
        reconnect: ReconnectPolicy = .default,
        connectTimeout: Duration = .seconds(15),
        healthyAfter: Duration = .seconds(30),
        resyncTimeout: Duration = .seconds(60),
        maxCachedDocuments: Int? = nil,
        closesWhenLoginIsLost: Bool = false
    ) {
        self.supportedVersions = supportedVersions
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatTimeout = heartbeatTimeout
        self.reconnect = reconnect
        self.connectTimeout = connectTimeout
        self.healthyAfter = healthyAfter
        self.resyncTimeout = resyncTimeout
        self.maxCachedDocuments = maxCachedDocuments
        self.closesWhenLoginIsLost = closesWhenLoginIsLost
    }
}
