import Bridge
import DDP
import Foundation
import HTTPTypes
import Testing

/// The bridge serves the HTTP contract it was built with: `/openapi.yaml` is the repository's
/// openapi.yaml, `/openapi.json` its JSON form (scripts/openapi-json.py), and both name this build's version.
@Suite struct ContractDocumentTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func theContractServedIsTheRepositorysAtThisVersion() async throws {
        let yaml = try String(contentsOf: Self.root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let json = try String(contentsOf: Self.root.appendingPathComponent("openapi.json"), encoding: .utf8)
        try await BridgeHarness.run { h in
            let servedYAML = try await h.request(.get, "/openapi.yaml")
            #expect(servedYAML.status == .ok && servedYAML.headers[.contentType]?.hasPrefix("application/yaml") == true)
            #expect(servedYAML.text == yaml, "the build serves openapi.yaml as it is")
            let servedJSON = try await h.request(.get, "/openapi.json")
            #expect(servedJSON.status == .ok && servedJSON.headers[.contentType] == "application/json")
            #expect(servedJSON.text == json)
            let contract = try JSONSerialization.jsonObject(with: Data(servedJSON.text.utf8)) as? [String: Any]
            let info = contract?["info"] as? [String: Any]
            #expect(info?["version"] as? String == BuildInfo.version, "openapi.yaml's version is the bridge's")
            #expect(yaml.contains("\n  version: \(BuildInfo.version)\n"))
        }
    }
}
