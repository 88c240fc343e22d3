public import DDP
public import HTTPTypes
public import NIOPosix
public import Timing

/// Where and how a ``DDPClient`` connects: the URL, transport options and protocol settings.
public struct DDPClientOptions: Sendable {
    /// TLS settings for `wss://` URLs.
    public struct TLS: Sendable, Equatable {
        /// A PEM file of CA certificates to trust instead of the system's.
        public var caFile: String?
        /// Accept any certificate (self-signed test setups). Never the default.
        public var allowSelfSigned: Bool

        public init(caFile: String? = nil, allowSelfSigned: Bool = false) {
            self.caFile = caFile
            self.allowSelfSigned = allowSelfSigned
        }
    }

    /// `ws://host:port/websocket` or `wss://…`.
    public var url: String
    public var protocolConfiguration: DDPClientConfiguration
    public var tls: TLS
    /// Negotiate `permessage-deflate`. Halves the frame rate on loopback; worth it on slow links.
    public var compression: Bool
    /// Largest DDP message accepted, in bytes.
    public var maxMessageSize: Int
    /// Extra handshake headers, e.g. `X-Forwarded-For` carrying the end user's address.
    public var handshakeHeaders: HTTPFields
    /// Paces reconnect attempts, shared by all the connections of a process.
    public var pacer: ReconnectPacer
    /// Logs why attempts fail, once per change of cause; shared by the connections of a process
    /// (by default each client has its own).
    public var failureLog: UpstreamFailureLog
    /// Where the client reads the time and sets its timers (a driven clock in tests).
    public var clock: BridgeClock
    /// How the upstream's host name becomes addresses; `nil`: the system's (getaddrinfo).
    package var resolver: (any Resolver & Sendable)?

    public init(
        url: String,
        protocolConfiguration: DDPClientConfiguration = DDPClientConfiguration(),
        tls: TLS = TLS(),
        compression: Bool = false,
        maxMessageSize: Int = 16 << 20,
        handshakeHeaders: HTTPFields = [:],
        pacer: ReconnectPacer = .unlimited,
        failureLog: UpstreamFailureLog = UpstreamFailureLog(),
        clock: BridgeClock = .system
    ) {
        self.clock = clock
        self.pacer = pacer
        self.failureLog = failureLog
        self.url = url
        self.protocolConfiguration = protocolConfiguration
        self.tls = tls
        self.compression = compression
        self.maxMessageSize = maxMessageSize
        self.handshakeHeaders = handshakeHeaders
    }
}
