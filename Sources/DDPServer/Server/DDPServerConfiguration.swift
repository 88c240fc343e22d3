public import DDP

/// What the in-process DDP server publishes and answers, and its protocol settings.
public struct DDPServerConfiguration: Sendable {
    /// A limit of calls per connection and interval (Meteor's accounts rate limit).
    public struct RateLimit: Sendable {
        public var calls: Int
        public var interval: Duration
        public init(calls: Int, interval: Duration) {
            self.calls = calls
            self.interval = interval
        }
    }

    public var publications: [String: Publication]
    /// Publications every connection gets without subscribing (Meteor's `Meteor.publish(null, …)`).
    public var universalPublications: [Publication]
    public var methods: [String: MethodHandler]
    /// Offer `/<collection>/insert|update|remove` for every collection, with Meteor's rules for untrusted code.
    public var collectionMethods: Bool
    /// Versions spoken, most preferred first.
    public var supportedVersions: [String]
    public var heartbeatInterval: Duration
    public var heartbeatTimeout: Duration
    /// `login` and `createUser` per connection (Meteor: 5 per 10 s). `nil` disables it.
    public var loginRateLimit: RateLimit?
    public var tokenLifetime: Duration
    /// Send `{"server_id":"0"}` when a WebSocket opens, as older Meteor releases did.
    public var greetsWithServerID = false

    public init(
        publications: [String: Publication] = [:],
        universalPublications: [Publication] = [],
        methods: [String: MethodHandler] = [:],
        collectionMethods: Bool = true,
        supportedVersions: [String] = ["1", "pre2", "pre1"],
        heartbeatInterval: Duration = .seconds(15),
        heartbeatTimeout: Duration = .seconds(15),
        loginRateLimit: RateLimit? = RateLimit(calls: 5, interval: .seconds(10)),
        tokenLifetime: Duration = .seconds(90 * 24 * 3600)
    ) {
        self.publications = publications
        self.universalPublications = universalPublications
        self.methods = methods
        self.collectionMethods = collectionMethods
        self.supportedVersions = supportedVersions
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatTimeout = heartbeatTimeout
        self.loginRateLimit = loginRateLimit
        self.tokenLifetime = tokenLifetime
    }
}
