/// The parts of the configuration its components are given: each takes the part it uses, made
/// here once by the composition root (``BridgeApplication``), and none takes the whole.
extension BridgeConfiguration {
    /// Who a request's client is: the trusted proxies and the IPv6 prefix.
    var clientIdentity: ClientIdentity {
        ClientIdentity(trustedProxies: trustedProxies, trustsPeer: trustForwardedFor, ipv6Prefix: ipv6ClientPrefix)
    }

    /// What every upstream connection is made with.
    var upstreamSettings: UpstreamSettings {
        UpstreamSettings(
            url: upstream, tls: upstreamTLS, compression: upstreamCompression, maxMessageSize: upstreamMaxMessageSize, ddp: ddp)
    }

    var sessionSettings: Session.Settings {
        Session.Settings(
            upstream: upstreamSettings, batchWindow: batchWindow, eventLogSize: eventLogSize, eventLogBytes: eventLogBytes,
            idleTimeout: sessionIdleTimeout, subscriptionLinger: subscriptionLinger, maxSubscriptionParamsSize: maxSubscriptionParamsSize,
            queryTimeBudget: queryTimeBudget)
    }

    /// What a user's session may hold.
    var userSessionLimits: Session.Limits {
        Session.Limits(subscriptions: maxSubscriptionsPerSession, streams: maxStreamsPerSession)
    }

    var memoryBudgetSettings: MemoryBudget.Settings {
        MemoryBudget.Settings(limit: memoryBudget, addressPercent: memoryShareAddress, anonymousPercent: memoryShareAnonymous)
    }

    var queryLimits: DocumentQuery.Limits { DocumentQuery.Limits(defaultLimit: defaultQueryLimit, maxLimit: maxQueryLimit) }

    var registrySettings: SessionRegistry.Settings {
        SessionRegistry.Settings(
            session: sessionSettings, sessionLimits: userSessionLimits, clients: clientIdentity, budget: memoryBudgetSettings,
            maxSessions: maxSessions, maxSessionsPerAddress: maxSessionsPerAddress, loginRateLimit: loginRateLimit,
            sessionRateLimit: sessionRateLimit, connectTimeout: connectTimeout, requestTimeout: requestTimeout,
            heartbeatInterval: heartbeatInterval, shutdownGrace: shutdownGrace, reconnectRate: reconnectRate, reconnectBurst: reconnectBurst,
            sessionStore: sessionStore, sessionKey: sessionKey, dataDirectory: dataDirectory, storeTimeout: storeTimeout,
            storeCheckInterval: storeCheckInterval)
    }

    var publicFanoutSettings: PublicFanout.Settings {
        PublicFanout.Settings(
            publications: publicPublications, session: sessionSettings, connections: publicConnections,
            maxSubscriptions: publicMaxSubscriptions, maxSubscriptionsPerAddress: publicMaxSubscriptionsPerAddress,
            maxReaders: publicMaxReaders, maxReadersPerAddress: publicMaxReadersPerAddress, connectTimeout: connectTimeout,
            requestTimeout: requestTimeout, heartbeatInterval: heartbeatInterval)
    }

    var admissionLimits: ConnectionAdmission.Limits {
        ConnectionAdmission.Limits(total: maxConnections, perAddress: maxConnectionsPerAddress, clients: clientIdentity)
    }

    var hygieneSettings: RequestHygieneMiddleware.Settings {
        RequestHygieneMiddleware.Settings(
            corsOrigins: corsOrigins, cookieSecurity: cookieSecurity, mcpPath: mcpPath, mcpAllowedOrigins: mcpAllowedOrigins,
            clients: clientIdentity)
    }

    var routeSettings: BridgeRoutes.Settings {
        BridgeRoutes.Settings(
            clients: clientIdentity, maxBodySize: maxBodySize, connectTimeout: connectTimeout, requestTimeout: requestTimeout,
            maxRequestTimeout: maxRequestTimeout, sessionIdleTimeout: sessionIdleTimeout, queryLimits: queryLimits,
            queryTimeBudget: queryTimeBudget, streamBufferLimit: streamBufferLimit, streamStallTimeout: streamStallTimeout,
            streamRetryMilliseconds: streamRetryMilliseconds, mcpPath: mcpPath, mcpTools: mcpTools, publicMaxAge: publicMaxAge,
            corsOrigins: corsOrigins, metricsListener: metricsListener, readTimeout: readTimeout)
    }
}
