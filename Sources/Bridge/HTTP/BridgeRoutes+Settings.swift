extension BridgeRoutes {
    /// The part of the configuration the routes use: how requests are read and bounded, how long
    /// they wait, and what the streams, the MCP endpoint and the public reads answer with.
    struct Settings: Sendable, Equatable {
        /// Who a request's client is, for the per-address limits.
        var clients: ClientIdentity
        /// Largest request body, in bytes.
        var maxBodySize: Int
        /// How long a request waits for its session's upstream; the default and the most a call
        /// or a subscription waits.
        var connectTimeout: Duration
        var requestTimeout: Duration
        var maxRequestTimeout: Duration
        /// The idle timeout a session's description states.
        var sessionIdleTimeout: Duration
        /// Documents a collection query returns, and how long it may scan.
        var queryLimits: DocumentQuery.Limits
        var queryTimeBudget: Duration
        /// Bytes a stream may fall behind, how long its start may stall, and the `retry:` hint it
        /// starts with (milliseconds).
        var streamBufferLimit: Int
        var streamStallTimeout: Duration
        var streamRetryMilliseconds: Int
        /// Where the MCP endpoint is, and the tools it offers beside the bridge's own.
        var mcpPath: String
        var mcpTools: MCPToolCatalog
        /// `Cache-Control: max-age` of a public collection read, in seconds.
        var publicMaxAge: Int
        /// Origins allowed from browsers: a public read varies by `Origin` when there are any.
        var corsOrigins: [String]
        /// `/metrics`' own listener; `nil`: on the API's.
        var metricsListener: MetricsListener?
        /// A connection to that listener idle this long is closed, as the API's are.
        var readTimeout: Duration
    }
}
