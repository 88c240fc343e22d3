import Bridge
import Foundation
import Testing

/// The settings' documents are made from the one table (`Settings.all`), as `--help` is: the
/// reference in docs/OPERATIONS.md, the settings file example and the environment file example
/// in deploy/. Each holds a generated part between markers; this test fails when one differs
/// from the table, and `DDP_BRIDGE_WRITE_DOCS=1 swift test --filter SettingsDocsTests` writes them.
@Suite struct SettingsDocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test(arguments: [
        ("docs/OPERATIONS.md", Settings.Document.markdown, "<!-- settings: begin (made from Settings.all) -->", "<!-- settings: end -->"),
        ("deploy/bridge.yaml.example", Settings.Document.yaml, "# settings: begin (made from Settings.all)", "# settings: end"),
        ("deploy/bridge.env.example", Settings.Document.environment, "# settings: begin (made from Settings.all)", "# settings: end")
    ])
    func eachDocumentListsEverySettingAsTheTableDeclaresIt(path: String, document: Settings.Document, begin: String, end: String) throws {
        let file = Self.root.appendingPathComponent(path)
        let text = try String(contentsOf: file, encoding: .utf8)
        let start = try #require(text.range(of: begin + "\n"), "\(path) has the marker \(begin)")
        let stop = try #require(text.range(of: end, range: start.upperBound..<text.endIndex), "\(path) has the marker \(end)")
        let made = Settings.reference(document)
        if ProcessInfo.processInfo.environment["DDP_BRIDGE_WRITE_DOCS"] == "1" {
            try (text[..<start.upperBound] + made + text[stop.lowerBound...]).write(to: file, atomically: true, encoding: .utf8)
            return
        }
        #expect(
            String(text[start.upperBound..<stop.lowerBound]) == made,
            "\(path) differs from Settings.all: DDP_BRIDGE_WRITE_DOCS=1 swift test --filter SettingsDocsTests")
        // The settings file names every setting but the two that name the sources.
        for setting in Settings.all where document != .yaml || !["config", "secrets-dir"].contains(setting.flag) {
            #expect(made.contains(document == .environment ? setting.environment : setting.flag), "\(path) names \(setting.flag)")
        }
    }

    /// The settings file example is a settings file the bridge reads: every setting's line in it,
    /// once uncommented, gives the setting its default.
    @Test func theSettingsFileExampleIsReadWithEveryLineUncommented() async throws {
        let example = try String(contentsOf: Self.root.appendingPathComponent("deploy/bridge.yaml.example"), encoding: .utf8)
        // `# name: value`, where name is a setting (its help is on the lines after it).
        let lines = example.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("# "), let name = line.dropFirst(2).split(separator: ":").first,
                Settings.setting(named: String(name)) != nil
            else { return nil }
            return String(line.dropFirst(2))
        }
        // Every setting but the two that name the sources (a setting with no default is empty: YAML's null, no value).
        #expect(lines.count == Settings.all.count - 2, "\(lines)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("example-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: folder) }
        try (["upstream: ws://meteor:3000/websocket"] + lines.filter { !$0.hasPrefix("upstream:") }).joined(separator: "\n").write(
            to: folder, atomically: true, encoding: .utf8)
        let sources = try await SettingsSources.load(flags: ["config": folder.path], environment: [:])
        let settings = try Settings(sources: sources)
        let defaults = try Settings(flags: ["upstream": "ws://meteor:3000/websocket"], environment: [:])
        for setting in Settings.all { #expect(setting.shown(settings) == setting.shown(defaults), "\(setting.flag)") }
    }
}
