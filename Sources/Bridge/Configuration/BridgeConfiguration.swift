public import BridgeStore
public import DDP
public import DDPClient
public import NIOCore
import NIOPosix
public import Timing

/// What the bridge runs on, as opposed to what it is set to: given to the application beside
/// its configuration (``BridgeApplication/make(configuration:runtime:http:logger:onServerRunning:onMetricsListening:)``),
/// as Hummingbird's `Application` takes its event loop group and logger.
public struct BridgeRuntime: Sendable {
    /// The one clock of the bridge: instants, timers and sleeps (tests pass a driven clock they move).
    public var clock: BridgeClock
    /// The event loops the bridge runs on: its HTTP server, every upstream connection (a
    /// session's client and its timers share one loop), the store's timers.
    public var eventLoopGroup: any EventLoopGroup
    /// Where every upstream connection of the bridge (sessions, the public pool, the readiness
    /// probe) reports why it failed: one warning per change of cause, not one per attempt and
    /// per session.
    public var upstreamFailureLog: UpstreamFailureLog
    /// The session store, when the application is given one (a test, or a program of this
    /// package): opened by the bridge at start, closed at shutdown, and used in place of the one
    /// the configuration names (`sessionStore`). Sessions are written to a store only with a
    /// session key, this one included.
    package var sessionStore: (@Sendable () async throws -> any SessionStore)?

    public init(
        clock: BridgeClock = .system, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        upstreamFailureLog: UpstreamFailureLog = UpstreamFailureLog()
    ) {
        self.clock = clock
        self.eventLoopGroup = eventLoopGroup
        self.upstreamFailureLog = upstreamFailureLog
    }
}

/// Every setting of the bridge, with production defaults: values only.
public struct BridgeConfiguration: Sendable {
    /// The upstream Meteor app: `ws://host:port/websocket` or `wss://…`. Fixed by the operator.
    public var upstream: String
    public var upstreamTLS: DDPClientOptions.TLS
    /// Negotiate `permessage-deflate` with the upstream.
    public var upstreamCompression: Bool
    /// How long a new session waits for the upstream before answering 503.
    public var connectTimeout: Duration
    /// Default and maximum time a method call or a subscription waits.
    public var requestTimeout: Duration
    public var maxRequestTimeout: Duration
    /// A session with no request and no open stream for this long is closed.
    public var sessionIdleTimeout: Duration
    /// How long an unused shared subscription is kept before it is stopped upstream.
    public var subscriptionLinger: Duration
    public var maxSessions: Int
    public var maxSessionsPerAddress: Int
    public var maxSubscriptionsPerSession: Int
    /// Largest request body, in bytes.
    public var maxBodySize: Int
    /// Failed logins per client address and interval, on every route that logs in, so that new
    /// sessions are no way around Meteor's per-connection login limit. Strict.
    public var loginRateLimit: (calls: Int, interval: Duration)
    /// Session creations per client address and interval. Loose: an ordinary script or test
    /// suite opening dozens of sessions a minute is never refused.
    public var sessionRateLimit: (calls: Int, interval: Duration) = (100, .seconds(10))
    /// Documents a collection query returns when it sets no `limit`, and the most it may ask for.
    public var defaultQueryLimit: Int
    public var maxQueryLimit: Int
    /// Trust the direct peer as a proxy (deprecated: one proxy in front; prefer `trustedProxies`).
    public var trustForwardedFor: Bool
    /// Reverse proxies whose `X-Forwarded-For` entries are trusted: the client address is the
    /// rightmost entry that is not one of them.
    public var trustedProxies: [IPRange] = []
    /// The bits of an IPv6 client's address that name the client for every per-address limit:
    /// one /64 is one client (an IPv4 client is its address).
    public var ipv6ClientPrefix = 64
    /// Upstream protocol settings (heartbeats, reconnect backoff, the most documents a session's
    /// cache may hold: `--session-max-documents`).
    public var ddp: DDPClientConfiguration
    /// Changes closer together than this are consolidated per document before streams see them.
    public var batchWindow: Duration = .milliseconds(1)
    /// Events each session keeps for streams that resume with `Last-Event-ID`.
    public var eventLogSize = 10_000
    /// Bytes of events each session keeps (frames plus the document versions they hold); the
    /// oldest go first, and a stream resuming from before them gets a `reset`.
    public var eventLogBytes = 8 << 20
    /// Comment lines on idle streams, so proxies keep them open.
    public var heartbeatInterval: Duration = .seconds(15)
    /// Bytes a stream may fall behind before it is cut off.
    public var streamBufferLimit = 1 << 20
    /// A stream whose start (a replay, a snapshot) makes no progress for this long (its reader
    /// takes nothing) ends with `slow-consumer`: without live changes nothing else would cut it.
    public var streamStallTimeout: Duration = .seconds(30)
    public var maxStreamsPerSession = 16
    /// What `/mcp` offers beside the bridge's own tools: the Meteor methods of the operator's
    /// tools file (`--mcp-tools`), and whether `call_method` is offered.
    public var mcpTools = MCPToolCatalog()
    /// MCP sessions held at once (each address also within `maxSessionsPerAddress`).
    public var mcpMaxSessions = 1_000
    /// Where the MCP endpoint is (`/mcp`).
    public var mcpPath = "/mcp"
    /// Origins (normalized) of pages allowed to use the MCP endpoint besides the bridge's own and
    /// the CORS origins.
    public var mcpAllowedOrigins: Set<String> = []
    /// At most one `notifications/resources/updated` per resource per this long.
    public var mcpNotifyInterval: Duration = .seconds(1)
    /// Origins allowed to call the bridge from a browser (`*`: any); empty: no CORS headers.
    public var corsOrigins: [String] = []
    /// The origins the bridge's own pages (the web console) are opened from: a write whose
    /// `Origin` is one of them is same-origin. `nil`: the listening address's (``OwnOrigins``).
    public var publicOrigins: [String]?
    /// Bytes (estimated) the documents held for clients may take in all; `nil`: half of the
    /// cgroup's memory limit, or of the machine's memory.
    public var memoryBudget: Int?
    /// Percent of the budget one client address may hold, and one whose sessions are anonymous.
    public var memoryShareAddress: Double = 25
    public var memoryShareAnonymous: Double = 5
    /// Client connections held open at once; `nil`: the open-file limit less a reserve, less the
    /// upstream connections open at the time.
    public var maxConnections: Int?
    /// Client connections one address may hold open (a trusted proxy's count only in the total).
    public var maxConnectionsPerAddress = 256
    /// When the session cookie carries `Secure`.
    public var cookieSecurity: CookieSecurity = .auto
    /// The `retry:` hint streams start with, in milliseconds.
    public var streamRetryMilliseconds = 2_000
    /// A client connection must send a whole request head (and keep its body coming) within this
    /// time, and is closed after this long idle between requests. Open streams are not affected.
    public var readTimeout: Duration = .seconds(30)
    /// Where `/metrics` (and the probes) are served apart from the API (`--metrics-port`):
    /// `nil`, on the API's listener only.
    public var metricsListener: MetricsListener?
    /// The web console served at `/`: by default the one built into the binary.
    public var console: ConsoleSource = .embedded
    /// On shutdown, requests in flight get this long to finish before sessions are closed under them.
    public var shutdownGrace: Duration = .seconds(10)
    /// Largest message accepted from the upstream, in bytes (a larger one closes that connection,
    /// and fails the subscriptions and calls that were waiting for it).
    public var upstreamMaxMessageSize = 16 << 20
    /// Reconnect attempts per second across all sessions, after a burst of `reconnectBurst`:
    /// after a Meteor restart, sessions come back at this pace rather than all at once.
    public var reconnectRate: Double = 100
    public var reconnectBurst = 50
    /// How long one collection query may scan before it is refused with 422.
    public var queryTimeBudget: Duration = .seconds(2)
    /// Publications anyone may read without a session (``PublicFanout``); none by default.
    public var publicPublications = PublicPublications()
    /// Anonymous upstream connections the public subscriptions share; 0 (the default): one for
    /// each distinct public subscription, so that no reader sees another subscription's documents.
    public var publicConnections = 0
    /// Distinct public subscriptions (publication + params) at once, over all those connections.
    public var publicMaxSubscriptions = 100
    /// Bytes a session subscription's name and params may take as JSON (they are kept for the
    /// session's life, and in its store); more is refused with 413.
    public var maxSubscriptionParamsSize = 64 << 10
    /// Of those, how many one client address may make (a subscription counts against the address
    /// that made it until it is stopped; joining one that exists costs nothing).
    public var publicMaxSubscriptionsPerAddress = 10
    /// Open public streams in all, and per client address.
    public var publicMaxReaders = 20_000
    public var publicMaxReadersPerAddress = 100
    /// `Cache-Control: max-age` of a public collection read, in seconds (0: `no-cache`).
    public var publicMaxAge = 1
    /// Where sessions are kept besides memory (only with a ``sessionKey``).
    public var sessionStore: SessionStoreChoice = .sqlite
    /// The folder of the embedded store's `sessions.sqlite`.
    public var dataDirectory = "data"
    /// How often a stored session held here is looked up before it serves, so one that another
    /// replica ended ends here too.
    public var storeCheckInterval: Duration = .seconds(2)
    /// How long one operation of the store may take before it counts as failed (the embedded
    /// store waits up to two thirds of it for a lock another process holds).
    public var storeTimeout: Duration = .seconds(3)
    /// Seals the Meteor login tokens a store keeps; without it, sessions stay in memory only.
    public var sessionKey: SessionKey?

    public init(
        upstream: String,
        upstreamTLS: DDPClientOptions.TLS = .init(),
        upstreamCompression: Bool = false,
        connectTimeout: Duration = .seconds(10),
        requestTimeout: Duration = .seconds(30),
        maxRequestTimeout: Duration = .seconds(300),
        sessionIdleTimeout: Duration = .seconds(15 * 60),
        subscriptionLinger: Duration = .seconds(5),
        maxSessions: Int = 10_000,
        maxSessionsPerAddress: Int = 100,
        maxSubscriptionsPerSession: Int = 100,
        maxBodySize: Int = 1 << 20,
        loginRateLimit: (calls: Int, interval: Duration) = (10, .seconds(60)),
        defaultQueryLimit: Int = 1_000,
        maxQueryLimit: Int = 100_000,
        trustForwardedFor: Bool = false,
        ddp: DDPClientConfiguration = DDPClientConfiguration(maxCachedDocuments: 100_000)
    ) {
        self.upstream = upstream
        self.upstreamTLS = upstreamTLS
        self.upstreamCompression = upstreamCompression
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.maxRequestTimeout = maxRequestTimeout
        self.sessionIdleTimeout = sessionIdleTimeout
        self.subscriptionLinger = subscriptionLinger
        self.maxSessions = maxSessions
        self.maxSessionsPerAddress = maxSessionsPerAddress
        self.maxSubscriptionsPerSession = maxSubscriptionsPerSession
        self.maxBodySize = maxBodySize
        self.loginRateLimit = loginRateLimit
        self.defaultQueryLimit = defaultQueryLimit
        self.maxQueryLimit = maxQueryLimit
        self.trustForwardedFor = trustForwardedFor
        self.ddp = ddp
    }
}

/// Where the web console served at `/` comes from.
public enum ConsoleSource: Sendable, Equatable {
    /// The files built into the binary (public/ when it was built).
    case embedded
    /// A folder's files (`--public-dir`).
    case folder(String)
    /// No console.
    case none
}

/// A listener of its own for `/metrics`, `/healthz` and `/readyz`, so an operator can keep the
/// metrics off the public port.
public struct MetricsListener: Sendable, Equatable {
    /// Address to listen on (`--metrics-host`, else `--host`); `nil`: 127.0.0.1.
    public var host: String?
    public var port: Int

    public init(host: String? = nil, port: Int) {
        self.host = host
        self.port = port
    }
}
