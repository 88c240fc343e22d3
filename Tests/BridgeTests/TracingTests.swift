import Foundation
import HTTPTypes
import InMemoryTracing
import Logging
import Testing
import Tracing

@testable import Bridge

/// Spans of routed requests and their upstream children, through the tracer of the test's task
/// (`withTracer`): what the OTLP check (scripts/trace-test.sh) sees at a collector, without one.
@Suite struct TracingTests {
    @Test func aMethodCallIsARequestSpanWithItsUpstreamCallAsChild() async throws {
        let tracer = InMemoryTracer()
        try await withTracer(tracer) {
            try await BridgeHarness.run { h in
                let (token, _) = try await h.session()
                #expect(try await h.request(.post, "/v1/methods/echo", token: token, body: "[1]").status == .ok)
                let subscribed = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
                #expect(subscribed.status == .ok || subscribed.status == .created)
                _ = try await h.request(.get, "/healthz")
                let failed = try await h.request(.post, "/v1/methods/no-such-method", token: token, body: "[]")
                #expect(failed.status.code >= 400)
            }
        }
        let spans = tracer.finishedSpans
        let server = try #require(
            spans.first { $0.operationName == "POST /v1/methods/**" && $0.attributes["url.path"]?.toSpanAttribute() == .string("/v1/methods/echo") },
            "\(spans.map(\.operationName))")
        #expect(server.kind == .server)
        #expect(server.attributes["http.response.status_code"]?.toSpanAttribute() == .int64(200))
        #expect(server.attributes["http.route"]?.toSpanAttribute() == .string("/v1/methods/**"))
        let call = try #require(spans.first { $0.operationName == "ddp.method" && $0.attributes["rpc.method"]?.toSpanAttribute() == .string("echo") })
        #expect(call.kind == .client && call.parentSpanID == server.spanID && call.traceID == server.traceID)
        #expect(call.attributes["rpc.method"]?.toSpanAttribute() == .string("echo"))
        let subscribe = try #require(spans.first { $0.operationName == "POST /v1/subscriptions" })
        let wait = try #require(spans.first { $0.operationName == "ddp.subscribe" })
        #expect(wait.attributes["ddp.subscription"]?.toSpanAttribute() == .string("tasks"))
        #expect(wait.parentSpanID == subscribe.spanID)
        #expect(!spans.contains { $0.operationName.contains("healthz") }, "probes are not traced")
        let refused = try #require(
            spans.first { $0.operationName == "ddp.method" && $0.attributes["rpc.method"]?.toSpanAttribute() == .string("no-such-method") })
        #expect(!refused.errors.isEmpty, "a failed upstream call records its error")
    }

    @Test func credentialsInTheQueryAreRedacted() {
        // Names are read as the routes read them: percent-decoded (`%74oken` is `token`).
        #expect(RequestTracing.redacted("%74oken=abc&t%6Fken=d&x=1") == "%74oken=REDACTED&t%6Fken=REDACTED&x=1")
        #expect(RequestTracing.redacted("%ZZ=abc") == "%ZZ=REDACTED")
        #expect(RequestTracing.redacted("token=abc&collections=tasks") == "token=REDACTED&collections=tasks")
        #expect(
            RequestTracing.redacted("selector=%7B%7D&access_token=x&apiKey=y&limit=2")
                == "selector=%7B%7D&access_token=REDACTED&apiKey=REDACTED&limit=2")
        #expect(RequestTracing.redacted("tokens") == "tokens")
        #expect(RequestTracing.redacted("") == nil && RequestTracing.redacted(nil) == nil)
    }

    /// Only a `traceparent` of the standard's shape, sent once, is given to the tracer.
    @Test func onlyAWellFormedTraceparentIsRead() {
        #expect(RequestTracing.isTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
        for bad in [
            "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01, 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        ] {
            #expect(!RequestTracing.isTraceparent(bad), "\(bad)")
        }
    }

    /// Values swift-otel would stop the process on are refused first, naming the variable; off
    /// without an endpoint; off when the SDK is disabled.
    @Test func tracingSettingsThatWouldTrapAreRefused() throws {
        let logger = Logger(label: "tracing-test")
        for (variable, value) in [
            ("OTEL_PROPAGATORS", "tracecontext,baggage"), ("OTEL_PROPAGATORS", "b3"), ("OTEL_TRACES_SAMPLER", "jaeger_remote"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
        ] {
            do {
                _ = try TraceExport.backend(endpoint: "http://127.0.0.1:4318", environment: [variable: value], logger: logger)
                Issue.record("\(variable)=\(value) must be refused")
            } catch {
                #expect(error.description.hasPrefix("\(variable): '"), "\(error.description)")
            }
        }
        #expect(try TraceExport.backend(endpoint: nil, environment: [:], logger: logger) == nil)
        #expect(
            try TraceExport.backend(endpoint: "http://127.0.0.1:4318", environment: ["OTEL_SDK_DISABLED": "true"], logger: logger) == nil)
        #expect(throws: Settings.Invalid.self) {
            try Settings(flags: ["upstream": "ws://m:3000/websocket", "otlp-endpoint": "collector:4318"], environment: [:])
        }
    }
}
