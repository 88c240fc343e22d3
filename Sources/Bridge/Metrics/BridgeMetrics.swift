public import CoreMetrics
import DDP
public import Prometheus

/// The bridge's metrics, made through swift-metrics with an injected factory (no global state)
/// and emitted in Prometheus text format at `/metrics`. Gauges are set when scraped.
public struct BridgeMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory
    let reconnects: CoreMetrics.Counter
    /// Events written to session streams, and dropped from them (slow consumers).
    let sessionStreams: StreamCounters
    /// The same for public readers (``PublicFanout``).
    let publicStreams: StreamCounters
    let methodDuration: CoreMetrics.Timer
    let failedLogins: CoreMetrics.Counter
    /// The session store: 1 while it answers, 0 after a failure; sessions resumed from it.
    let storeUp: CoreMetrics.Gauge
    let sessionsResumed: CoreMetrics.Counter
    /// Stored sessions this bridge could not unseal (another `--session-key`).
    let sessionKeyMismatches: CoreMetrics.Counter
    /// Sessions whose loading subscriptions were stopped for the memory budget.
    let memoryBudgetStops: CoreMetrics.Counter
    /// Sessions written to the store.
    let storeSaves: CoreMetrics.Counter
    private let storeErrorCounters = LockedState<[String: CoreMetrics.Counter]>([:])
    /// Failed upstream connection attempts by cause (``DDP/UpstreamFailure/Code``), made once each.
    private let upstreamFailureCounters: LockedState<[String: CoreMetrics.Counter]>
    /// Request counters by "route status", made once each (making one per request showed in profiles).
    private let requestCounters = LockedState<[String: CoreMetrics.Counter]>([:])

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5), .seconds(30)
        ]
        self.factory = factory
        reconnects = CoreMetrics.Counter(label: "ddp_bridge_upstream_reconnects_total", factory: factory)
        sessionStreams = StreamCounters(
            delivered: CoreMetrics.Counter(label: "ddp_bridge_sse_events_delivered_total", factory: factory),
            dropped: CoreMetrics.Counter(label: "ddp_bridge_sse_events_dropped_total", factory: factory))
        publicStreams = StreamCounters(
            delivered: CoreMetrics.Counter(label: "ddp_bridge_public_events_delivered_total", factory: factory),
            dropped: CoreMetrics.Counter(label: "ddp_bridge_public_events_dropped_total", factory: factory))
        methodDuration = CoreMetrics.Timer(label: "ddp_bridge_method_duration_seconds", factory: factory)
        failedLogins = CoreMetrics.Counter(label: "ddp_bridge_failed_logins_total", factory: factory)
        storeUp = CoreMetrics.Gauge(label: "ddp_bridge_session_store_up", factory: factory)
        sessionsResumed = CoreMetrics.Counter(label: "ddp_bridge_sessions_resumed_total", factory: factory)
        sessionKeyMismatches = CoreMetrics.Counter(label: "ddp_bridge_session_key_mismatches_total", factory: factory)
        memoryBudgetStops = CoreMetrics.Counter(label: "ddp_bridge_memory_budget_stops_total", factory: factory)
        storeSaves = CoreMetrics.Counter(label: "ddp_bridge_session_store_saves_total", factory: factory)
        // Every cause's series from the start, at 0: a rate over a series that appears only
        // with its first failure misses that failure, and dashboards show the closed set.
        var failures: [String: CoreMetrics.Counter] = [:]
        for cause in UpstreamFailure.Code.all.map(\.description) + ["unknown"] {
            failures[cause] = CoreMetrics.Counter(
                label: "ddp_bridge_upstream_failures_total", dimensions: [("cause", cause)], factory: factory)
        }
        upstreamFailureCounters = LockedState(failures)
        // What is running: one series, 1, labelled with the version and the commit.
        CoreMetrics.Gauge(
            label: "ddp_bridge_build_info", dimensions: [("version", BuildInfo.version), ("commit", BuildInfo.commit)], factory: factory
        ).record(1)
    }

    /// Failures of the session store by operation (open, load, save, end, purge, seal).
    func storeErrors(operation: String) -> CoreMetrics.Counter {
        storeErrorCounters.withLock { counters in
            if let counter = counters[operation] { return counter }
            let counter = CoreMetrics.Counter(
                label: "ddp_bridge_session_store_errors_total", dimensions: [("operation", operation)], factory: factory)
            counters[operation] = counter
            return counter
        }
    }

    /// A failed upstream connection attempt (a session's, the public pool's or the readiness
    /// probe's), by its cause's code; `unknown` when nobody could tell.
    func countUpstreamFailure(_ failure: UpstreamFailure?) {
        let cause = failure.map { "\($0.code)" } ?? "unknown"
        let counter = upstreamFailureCounters.withLock { counters in
            if let counter = counters[cause] { return counter }
            let counter = CoreMetrics.Counter(label: "ddp_bridge_upstream_failures_total", dimensions: [("cause", cause)], factory: factory)
            counters[cause] = counter
            return counter
        }
        counter.increment()
    }

    /// Client connections refused at once, by reason (`address`: past its share; `total`).
    func connectionRefused(reason: String) {
        CoreMetrics.Counter(label: "ddp_bridge_connections_refused_total", dimensions: [("reason", reason)], factory: factory).increment()
    }

    func countRequest(route: String, status: Int) {
        let key = "\(status) \(route)"
        let counter = requestCounters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(
                label: "ddp_bridge_http_requests_total", dimensions: [("route", route), ("status", String(status))], factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    /// Sets the gauges from the sessions as they are now, and returns the Prometheus text.
    func scrape(_ registry: SessionRegistry, probe: ReadinessProbe, fanout: PublicFanout, admission: ConnectionAdmission) -> [UInt8] {
        let sessions = registry.allSessions
        CoreMetrics.Gauge(label: "ddp_bridge_client_connections", factory: factory).record(admission.openConnections)
        CoreMetrics.Gauge(label: "ddp_bridge_memory_budget_bytes", factory: factory).record(registry.budget.limit)
        CoreMetrics.Gauge(label: "ddp_bridge_memory_budget_used_bytes", factory: factory).record(registry.budget.used)
        CoreMetrics.Gauge(label: "ddp_bridge_client_connections_limit", factory: factory).record(admission.limit)
        CoreMetrics.Gauge(label: "ddp_bridge_sessions", factory: factory).record(sessions.count)
        CoreMetrics.Gauge(label: "ddp_bridge_sse_streams", factory: factory).record(sessions.reduce(0) { $0 + $1.openStreamCount })
        var byState: [String: Int] = ["connected": 0, "connecting": 0, "reconnecting": 0, "closed": 0]
        for session in sessions { byState[Self.name(session.connection), default: 0] += 1 }
        for (state, count) in byState {
            CoreMetrics.Gauge(label: "ddp_bridge_upstream_connections", dimensions: [("state", state)], factory: factory).record(count)
        }
        CoreMetrics.Gauge(label: "ddp_bridge_upstream_ready", factory: factory).record(probe.isReady ? 1 : 0)
        let report = fanout.report
        CoreMetrics.Gauge(label: "ddp_bridge_public_readers", factory: factory).record(report.readers)
        CoreMetrics.Gauge(label: "ddp_bridge_public_subscriptions", factory: factory).record(report.subscriptions)
        var publicByState: [String: Int] = ["connected": 0, "connecting": 0, "reconnecting": 0, "closed": 0]
        for connection in report.connections { publicByState[Self.name(connection), default: 0] += 1 }
        for (state, count) in publicByState {
            CoreMetrics.Gauge(label: "ddp_bridge_public_upstream_connections", dimensions: [("state", state)], factory: factory).record(count)
        }
        return MetricsHelp.annotate(self.registry.emitToBuffer())
    }

    static func name(_ state: ConnectionState) -> String {
        switch state {
        case .idle, .connecting: "connecting"
        case .connected: "connected"
        case .reconnecting: "reconnecting"
        case .closed: "closed"
        }
    }
}

/// What a stream counts: events written to its consumer, and events dropped (a slow consumer cut off).
struct StreamCounters: Sendable {
    let delivered: CoreMetrics.Counter
    let dropped: CoreMetrics.Counter
}
