import Bridge
import DDP
import HTTPTypes
import HummingbirdTesting
import Testing

@Suite struct MetricsTests {
    /// The value of a sample line `name{labels} value` (labels given as they appear), or nil.
    /// Which version and commit is running, for dashboards and alerts across an upgrade.
    @Test func theBuildIsOneSeriesWithItsVersionAndCommit() async throws {
        try await BridgeHarness.run { h in
            let text = try await h.request(.get, "/metrics").text
            let line = text.split(separator: "\n").first { $0.hasPrefix("ddp_bridge_build_info{") }
            #expect(line?.contains(#"version="\#(BuildInfo.version)""#) == true, "\(line ?? "no ddp_bridge_build_info")")
            #expect(line?.contains(#"commit="\#(BuildInfo.commit)""#) == true && BuildInfo.commit != "", "\(line ?? "")")
            #expect(line?.hasSuffix(" 1") == true || line?.hasSuffix(" 1.0") == true)
        }
    }

    @Test func metricsFollowRealTraffic() async throws {
        try await BridgeHarness.run { h in
            let (token, _) = try await h.session()
            _ = try await h.request(.post, "/v1/methods/echo", token: token, body: "[1]")
            _ = try await h.request(.post, "/v1/methods/nope", token: token)
            let port = try #require(h.client.port)
            try await withEventStream(port: port, "/v1/events?subscribe=ticker&params=\(urlEncoded("[50,3]"))", token: token) { stream in
                // Ticks published together are consolidated into one change: wait for the last one.
                try await stream.wait("the third tick") { events in events.contains { $0.event == "changed" && $0.json["fields"]?["n"] == 3 } }
                let changes = await stream.events.filter { $0.event == "changed" }.count
                let metrics = try await h.request(.get, "/metrics")
                #expect(metrics.status == .ok)
                #expect(metrics.headers[.contentType]?.hasPrefix("text/plain") == true)
                let text = metrics.text
                #expect(metricSample(text, "ddp_bridge_sessions") == 1)
                #expect(metricSample(text, "ddp_bridge_sse_streams") == 1)
                #expect(metricSample(text, #"ddp_bridge_upstream_connections{state="connected"}"#) == 1)
                #expect(metricSample(text, "ddp_bridge_upstream_ready") == 1)
                #expect(metricSample(text, "ddp_bridge_method_duration_seconds_count") == 2)
                #expect((metricSample(text, "ddp_bridge_sse_events_delivered_total") ?? 0) >= Double(changes))
                #expect(text.contains(#"ddp_bridge_http_requests_total{route="/v1/methods/**",status="200"} 1"#), "\(text)")
                #expect(text.contains(#"ddp_bridge_http_requests_total{route="/v1/methods/**",status="404"} 1"#))
                #expect(text.contains(#"ddp_bridge_http_requests_total{route="/v1/sessions",status="201"} 1"#))
            }
        }
    }
}
