import DDP
import DDPServer
import HTTPTypes
import Logging
import Testing

/// A collection write goes to `/{name}/{op}`, and to Meteor 3's `/{name}/{op}Async` only when
/// the upstream has no method by the first name (``DDP/DDPError/isMethodNotFound(_:)``).
@Suite struct CollectionFallbackTests {
    @Test func onlyAMissingMethodFallsBackToItsAsyncName() async throws {
        let configuration = DDPServerConfiguration(
            methods: [
                "/things/insertAsync": { _, _ in "made-by-async" },
                // The method exists and fails with a 404 naming another method (one it called).
                "/things/remove": { _, _ in throw DDPError.methodNotFound("/audit/log") },
                "/things/removeAsync": { _, _ in 1 }
            ],
            collectionMethods: false)
        let upstream = LocalDDPServer(configuration: configuration, logger: Logger(label: "upstream"))
        try await upstream.start()
        do {
            try await BridgeHarness.run(upstreamURL: await upstream.url) { h in
                let (token, _) = try await h.session()
                let inserted = try await h.request(.post, "/v1/collections/things", token: token, body: #"{"text":"x"}"#)
                #expect(inserted.status == .created && inserted["id"] == "made-by-async", "\(inserted.text)")
                expectError(try await h.request(.delete, "/v1/collections/things/abc", token: token), .notFound, 404)
                let started = await upstream.core.methodsStarted
                #expect(started["/things/insert"] == 1 && started["/things/insertAsync"] == 1)
                #expect(started["/things/remove"] == 1 && started["/things/removeAsync"] == nil, "\(started)")
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }
}
