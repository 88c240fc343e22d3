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
    /// The tracer to bootstrap (`InstrumentationSystem.bootstrap`) and the service that exports
    /// its spans (run it beside the bridge; it flushes at shutdown). `nil`: tracing is off.
    public static func backend(endpoint: String?, environment: [String: String], logger: Logger) throws(Settings.Invalid)
        -> (tracer: any Tracer, service: any Service)?
    {
        let fromEnvironment = environment["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
        guard endpoint != nil || fromEnvironment != nil else { return nil }
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" {
            logger.notice("tracing is off: OTEL_SDK_DISABLED is true")
            return nil
        }
        try refuseWhatWouldTrap(environment)
        var configuration = OTel.Configuration.default
        configuration.serviceName = "ddp-bridge"
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        if let endpoint {
            // A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: spans go to its /v1/traces.
            var base = endpoint
            while base.hasSuffix("/") { base.removeLast() }
            configuration.traces.otlpExporter.endpoint = base + "/v1/traces"
        }
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            return (backend.factory, backend.service)
        } catch {
            throw Settings.Invalid(description: "tracing cannot start (--otlp-endpoint, OTEL_* variables): \(error)")
        }
    }

    /// The process's log lines carry the trace and span of the request they belong to
    /// (`trace_id`, `span_id`), when tracing is on.
    public static var loggingMetadata: Logger.MetadataProvider { OTel.makeLoggingMetadataProvider() }

    /// Values swift-otel stops the process on, refused here first.
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
    }
}
