import Foundation
public import Logging
import OTel
public import ServiceLifecycle
public import Tracing

/// The traces' way out: OTLP over HTTP (protobuf) to a collector, through swift-otel, when
/// `--otlp-endpoint` names one or `OTEL_EXPORTER_OTLP_ENDPOINT` is set; off otherwise. The
/// standard `OTEL_*` variables are honoured (service name, sampler, batch delays, headers), but
/// values swift-otel would end the process on (a propagator or sampler it does not have, the gRPC
/// protocol) are refused at start, naming the variable.
public enum TraceExport {
    /// Whether tracing is asked for: `--otlp-endpoint`, or a collector in the standard variables.
    public static func isOn(endpoint: String?, environment: [String: String]) -> Bool {
        guard environment["OTEL_SDK_DISABLED"]?.lowercased() != "true" else { return false }
        return endpoint != nil || environment["OTEL_EXPORTER_OTLP_ENDPOINT"] != nil || environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != nil
    }

    /// The tracer to bootstrap (`InstrumentationSystem.bootstrap`) and the service that exports
    /// its spans (run it beside the bridge; it flushes at shutdown), with the URL spans go to.
    /// `nil`: tracing is off. `--otlp-endpoint` wins over the `OTEL_EXPORTER_OTLP_…ENDPOINT`
    /// variables (swift-otel reads the process's environment after its configuration, so the
    /// flag is written there as `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). swift-otel's own log lines go
    /// to `logger`, with the values of the variables it reads left out (a header may hold a key).
    public static func backend(endpoint: String?, environment: [String: String], logger: Logger) throws(Settings.Invalid)
        -> (tracer: any Tracer, service: any Service, endpoint: String)?
    {
        guard isOn(endpoint: endpoint, environment: environment) else {
            if endpoint != nil { logger.notice("tracing is off: OTEL_SDK_DISABLED is true") }
            return nil
        }
        try refuseWhatWouldTrap(environment)
        var configuration = OTel.Configuration.default
        configuration.serviceName = "ddp-bridge"
        var diagnostics = Logger(label: "swift-otel") { _ in RedactingLogHandler(inner: logger.handler) }
        diagnostics.logLevel = .warning
        configuration.diagnosticLogger = .custom(diagnostics)
        configuration.diagnosticLogLevel = .warning
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // A collector that does not answer holds a stop for at most this long, well within the
        // grace a container gets (the OTEL_EXPORTER_OTLP_TIMEOUT and OTEL_BSP_EXPORT_TIMEOUT variables
        // still win): swift-otel's defaults, 10 s and 30 s, outlast Docker's 10 s stop.
        configuration.traces.otlpExporter.timeout = .seconds(3)
        configuration.traces.batchSpanProcessor.exportTimeout = .seconds(5)
        var resolved: String
        if let endpoint {
            // A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: spans go to its /v1/traces.
            var base = endpoint
            while base.hasSuffix("/") { base.removeLast() }
            resolved = base + "/v1/traces"
            setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", resolved, 1)
        } else if let traces = environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] {
            resolved = traces
        } else {
            var base = environment["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? ""
            while base.hasSuffix("/") { base.removeLast() }
            resolved = base + "/v1/traces"
        }
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            return (backend.factory, backend.service, resolved)
        } catch {
            throw Settings.Invalid(description: "tracing cannot start (--otlp-endpoint, OTEL_* variables): \(error)")
        }
    }

    /// The process's log lines carry the trace and span of the request they belong to
    /// (`trace_id`, `span_id`), when tracing is on.
    public static var loggingMetadata: Logger.MetadataProvider { OTel.makeLoggingMetadataProvider() }

    /// Values swift-otel stops the process on, or that would make it spin or never flush, refused
    /// here first, naming the variable.
    static func refuseWhatWouldTrap(_ environment: [String: String]) throws(Settings.Invalid) {
        let allowed: [(variable: String, values: Set<String>, list: Bool)] = [
            ("OTEL_PROPAGATORS", ["tracecontext", "none"], true),
            (
                "OTEL_TRACES_SAMPLER",
                ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"], false
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", ["http/protobuf", "http/json"], false),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", ["http/protobuf", "http/json"], false)
        ]
        for (variable, values, list) in allowed {
            guard let text = environment[variable] else { continue }
            let given = list ? text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() } : [text.lowercased()]
            for value in given where !values.contains(value) {
                throw Settings.Invalid(
                    description: "\(variable): '\(value)' is not supported by the bridge's tracing; use \(values.sorted().joined(separator: ", "))")
            }
        }
        // Milliseconds and counts: a batch of 0 never flushes, a delay of 0 spins a core.
        let numbers: [(variable: String, range: ClosedRange<Int>)] = [
            ("OTEL_BSP_SCHEDULE_DELAY", 1...3_600_000), ("OTEL_BSP_EXPORT_TIMEOUT", 1...600_000), ("OTEL_BSP_MAX_QUEUE_SIZE", 1...1_000_000),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1...1_000_000), ("OTEL_EXPORTER_OTLP_TIMEOUT", 1...600_000),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 1...600_000)
        ]
        for (variable, range) in numbers {
            guard let text = environment[variable] else { continue }
            guard let number = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
                throw Settings.Invalid(
                    description: "\(variable) must be a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
            }
        }
    }
}

/// A log handler that keeps the values swift-otel puts in its log lines about the variables it
/// read (`environment_value`, `previous_value`, `new_value`) out of them.
struct RedactingLogHandler: LogHandler {
    static let redacted: Set<String> = ["environment_value", "previous_value", "new_value"]
    var inner: any LogHandler

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue.filter { !Self.redacted.contains($0.key) } }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = Self.redacted.contains(key) ? "<redacted>" : newValue }
    }

    func log(event: LogEvent) {
        var event = event
        event.metadata = event.metadata?.mapValues { $0 }.filter { !Self.redacted.contains($0.key) }
        inner.log(event: event)
    }
}
