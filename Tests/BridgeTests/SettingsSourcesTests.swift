import Bridge
import FaultKit
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// Settings from every source swift-configuration reads for the bridge: the command line, the
/// environment, a secrets folder, a YAML or JSON file (read again while running), presets.
@Suite struct SettingsSourcesTests {
    static let upstream = "ws://meteor:3000/websocket"

    /// A folder of its own, removed at the end of the test.
    final class Folder: Sendable {
        let path: String

        init() throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("settings-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }

        deinit { try? FileManager.default.removeItem(atPath: path) }

        @discardableResult
        func write(_ name: String, _ text: String) throws -> String {
            let file = path + "/" + name
            try text.write(toFile: file, atomically: false, encoding: .utf8)
            return file
        }
    }

    static func settings(
        flags: [String: String] = [:], environment: [String: String] = [:], presets: [String: String] = [:]
    ) async throws(Settings.Invalid) -> Settings {
        let sources = try await SettingsSources.load(flags: flags, environment: environment, presets: presets)
        return try Settings(sources: sources)
    }

    static func refusal(flags: [String: String] = [:], environment: [String: String] = [:]) async -> String? {
        do {
            _ = try await settings(flags: flags, environment: environment)
            return nil
        } catch {
            return error.description
        }
    }

    /// Each source in its place: the command line, then the environment, then the secrets folder
    /// (a file named as the flag or as the variable, trimmed), then the file, then presets, then
    /// the default.
    @Test func eachSourceWinsOverTheNextInTheStatedOrder() async throws {
        let folder = try Folder()
        let secrets = folder.path + "/secrets"
        try FileManager.default.createDirectory(atPath: secrets, withIntermediateDirectories: true)
        let key = String(repeating: "ab", count: 32)
        try folder.write("secrets/session-key", key + "\n")
        try folder.write("secrets/DDP_BRIDGE_MAX_SESSIONS", " 77\n")
        try folder.write("secrets/max-body-size", "4096\n")
        let file = try folder.write(
            "bridge.yaml",
            """
            upstream: \(Self.upstream)
            port: 9001
            host: 0.0.0.0
            max-body-size: 2048
            max-sessions: 5
            request-timeout: 7.5
            upstream-compression: true
            cors-origins:
              - https://a.example.com
              - https://b.example.com
            heartbeat-interval: 3
            """)
        let settings = try await Self.settings(
            flags: ["config": file, "host": "127.0.0.2"],
            environment: ["DDP_BRIDGE_SECRETS_DIR": secrets, "DDP_BRIDGE_PORT": "9002", "DDP_BRIDGE_HOST": "127.0.0.3"],
            presets: ["heartbeat-interval": "9", "log-level": "notice", "request-timeout": "1"])
        #expect(settings.host == "127.0.0.2")  // the command line over the environment and the file
        #expect(settings.port == 9002)  // the environment over the file
        #expect(settings.configuration.maxBodySize == 4096)  // the secrets folder over the file
        #expect(settings.configuration.maxSessions == 77)  // a secret named as its variable, trimmed
        #expect(settings.configuration.sessionKey != nil)
        #expect(settings.configuration.requestTimeout == .milliseconds(7500))  // the file over presets
        #expect(settings.configuration.upstreamCompression)
        #expect(settings.configuration.corsOrigins == ["https://a.example.com", "https://b.example.com"])  // a list
        #expect(settings.configuration.heartbeatInterval == .seconds(3))
        #expect(settings.logLevel == "notice")  // presets over the default
        #expect(settings.logFormat == "human")  // the default
        #expect(settings.configFile == file && settings.secretsDirectory == secrets)
    }

    /// JSON is read as YAML: numbers, booleans and lists as their text.
    @Test func aJSONFileIsReadToo() async throws {
        let folder = try Folder()
        let file = try folder.write(
            "bridge.json",
            #"{"upstream": "\#(Self.upstream)", "port": 9003, "upstream-compression": true, "cors-origins": ["https://a.example.com"], "batch-window": 2.5}"#
        )
        let settings = try await Self.settings(flags: ["config": file])
        #expect(settings.port == 9003 && settings.configuration.upstreamCompression)
        #expect(settings.configuration.corsOrigins == ["https://a.example.com"])
        #expect(settings.configuration.batchWindow == .microseconds(2500))
    }

    /// A file or folder that cannot be used stops the start, naming the setting and what to fix;
    /// a bad value in the file names the file as where it was given.
    @Test func whatCannotBeUsedIsRefusedNamingTheSetting() async throws {
        let folder = try Folder()
        let cases: [(String, String)] = [
            ("prot: 9000\n", "has prot, which is no setting; did you mean port?"),
            ("config: other.yaml\n", "sets config, which only the command line or the environment may set"),
            ("port:\n  inner: 1\n", "port must be a value or a list of values"),
            ("- port\n- 9000\n", "must hold a mapping of settings"),
            ("port: [9000\n", "is not YAML or JSON"),
            ("port: 70000\n", "--port (DDP_BRIDGE_PORT) (given in the settings file) must be a whole number from 0 to 65535")
        ]
        for (index, (text, expected)) in cases.enumerated() {
            let file = try folder.write("case\(index).yaml", text)
            let message = await Self.refusal(flags: ["config": file, "upstream": Self.upstream])
            #expect(message?.contains(expected) == true, "\(text): \(message ?? "accepted")")
            #expect(message?.hasPrefix("--config (DDP_BRIDGE_CONFIG)") == true || expected.hasPrefix("--port"), "\(message ?? "")")
        }
        let missing = await Self.refusal(flags: ["config": folder.path + "/nothing.yaml", "upstream": Self.upstream])
        #expect(missing?.contains("--config (DDP_BRIDGE_CONFIG): cannot read") == true, "\(missing ?? "accepted")")
        let noFolder = await Self.refusal(environment: ["DDP_BRIDGE_SECRETS_DIR": folder.path + "/none-here"])
        #expect(noFolder?.contains("--secrets-dir (DDP_BRIDGE_SECRETS_DIR): '") == true && noFolder?.contains("is not a folder") == true)
    }

    /// A Kubernetes secret volume: each file a link into a hidden folder of the volume's own.
    /// The links are followed; the hidden folder's own files are not settings.
    @Test func secretsAsKubernetesMountsThemAreRead() async throws {
        let folder = try Folder()
        let secrets = folder.path + "/secrets"
        try FileManager.default.createDirectory(atPath: secrets + "/..2026_11_28", withIntermediateDirectories: true)
        try folder.write("secrets/..2026_11_28/session-key", String(repeating: "cd", count: 32) + "\n")
        try FileManager.default.createSymbolicLink(atPath: secrets + "/..data", withDestinationPath: "..2026_11_28")
        try FileManager.default.createSymbolicLink(atPath: secrets + "/session-key", withDestinationPath: "..data/session-key")
        let settings = try await Self.settings(flags: ["upstream": Self.upstream, "secrets-dir": secrets])
        #expect(settings.configuration.sessionKey != nil)
    }

    /// A file that is not YAML is refused by line and column, never quoting the line (it may hold
    /// a secret); `null` in a file leaves a setting unset.
    @Test func aBrokenFileIsRefusedWithoutQuotingIt() async throws {
        let folder = try Folder()
        let secret = String(repeating: "ef", count: 32)
        let broken = try folder.write("broken.yaml", "upstream: \(Self.upstream)\nsession-key \(secret)\nport: 1\n")
        let message = try #require(await Self.refusal(flags: ["config": broken]))
        #expect(message.contains("is not YAML or JSON (line ") && !message.contains(secret), "\(message)")
        let nulls = try folder.write("nulls.json", #"{"upstream": "\#(Self.upstream)", "port": null, "metrics-port": null}"#)
        let settings = try await Self.settings(flags: ["config": nulls])
        #expect(settings.port == 8080 && settings.configuration.metricsListener == nil)
    }

    /// A secret's text is never in a message, wherever it was given, nor in help.
    @Test func aSecretNeverAppearsInAMessageOrHelp() async throws {
        let folder = try Folder()
        let secret = "postgres://bridge:hunter2-very-secret@db:5432/bridge?sslmode=sometimes"
        try folder.write("session-store", secret + "\n")
        try folder.write("session-key", "not-a-key-hunter2\n")
        let fromFolder = await Self.refusal(flags: ["upstream": Self.upstream, "secrets-dir": folder.path])
        let message = try #require(fromFolder)
        #expect(!message.contains("hunter2"), "\(message)")
        #expect(message.contains("(given in the secrets folder"), "\(message)")
        let fromFlag = await Self.refusal(flags: ["upstream": Self.upstream, "session-store": secret])
        #expect(fromFlag?.contains("--session-store") == true && fromFlag?.contains("hunter2") == false, "\(fromFlag ?? "accepted")")
        let help = Settings.helpText()
        // Help shows a secret setting's default (sqlite), never a value given for it.
        #expect(Settings.setting(named: "session-key")?.shownDefault == nil)
        #expect(help.contains("--session-store ") && help.contains("--session-key "))
        #expect(Settings.all.filter(\.isSecret).map(\.flag).sorted() == ["session-key", "session-store"])
    }

    /// The file is read again while the bridge runs: a new log-level takes effect at once, one
    /// that is no level is refused in the log and the level kept; the command line still wins.
    @Test func theLogLevelFollowsTheFileWhileRunning() async throws {
        let folder = try Folder()
        let file = try folder.write("bridge.yaml", "upstream: \(Self.upstream)\nlog-level: info\n")
        let (lines, stream) = AsyncStream.makeStream(of: String.self)
        var logger = Logger(label: "settings-test") { _ in LineHandler(yield: { stream.yield($0) }) }
        logger.logLevel = .info
        let fileLog = logger
        let sources = try await SettingsSources.load(
            flags: ["config": file], environment: [:], fileLog: { fileLog }, filePollInterval: .milliseconds(50))
        let level = LiveLogLevel(.info)
        let service = LiveSettings(sources: sources, level: level, logger: logger)
        // A later modification time: the file is seen as changed whatever the clock's grain.
        let rewrite: @Sendable (String, Double) throws -> Void = { text, seconds in
            try folder.write("bridge.yaml", text)
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(seconds)], ofItemAtPath: file)
        }
        let finished = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await service.run() }
            let seen = try await withTimeLimit(.seconds(20)) {
                var reader = LineReader(lines)
                try rewrite("upstream: \(Self.upstream)\nlog-level: debug\n", 10)
                let changed = await reader.first(containing: "log level changed")
                #expect(changed?.contains("to=debug") == true, "\(changed ?? "no line")")
                #expect(level.level == .debug)
                try rewrite("upstream: \(Self.upstream)\nlog-level: loud\n", 20)
                let refused = await reader.first(containing: "is not a level")
                #expect(refused?.contains("given=loud") == true, "\(refused ?? "no line")")
                #expect(level.level == .debug)
                // No log-level in the file any more: back to the level the bridge started with.
                try rewrite("upstream: \(Self.upstream)\n", 30)
                let restored = await reader.first(containing: "log level changed")
                #expect(restored?.contains("to=info") == true, "\(restored ?? "no line")")
                #expect(level.level == .info)
                // A file that no longer parses: one warning, never its text (a secret may be in it).
                let secret = String(repeating: "ab", count: 32)
                try rewrite("upstream: \(Self.upstream)\nsession-key \(secret)\nlog-level: [\n", 40)
                let unreadable = await reader.first(containing: "cannot be read again")
                #expect(unreadable != nil && unreadable?.contains(secret) == false, "\(unreadable ?? "no line")")
                // Read again, with a key that is no setting: the next start would refuse it, said now.
                try rewrite("upstream: \(Self.upstream)\nprot: 1\n", 50)
                let problem = await reader.first(containing: "would stop the bridge at its next start")
                #expect(problem?.contains("did you mean port?") == true, "\(problem ?? "no line")")
                return true
            }
            group.cancelAll()
            return seen ?? false
        }
        #expect(finished, "the changes were not seen within 20 s")
        // The command line wins over the file: a change in the file changes nothing.
        let fixed = try folder.write("fixed.yaml", "upstream: \(Self.upstream)\nlog-level: debug\n")
        let pinned = try await SettingsSources.load(flags: ["config": fixed, "log-level": "error"], environment: [:])
        #expect(try Settings(sources: pinned).logLevel == "error")
    }

    /// The lines logged, read in order up to the next that holds a text.
    struct LineReader {
        var iterator: AsyncStream<String>.Iterator

        init(_ lines: AsyncStream<String>) { iterator = lines.makeAsyncIterator() }

        mutating func first(containing text: String) async -> String? {
            while let line = await iterator.next() {
                if line.contains(text) { return line }
            }
            return nil
        }
    }

    /// Each line logged, as `message key=value …`, handed to `yield`.
    struct LineHandler: LogHandler {
        let yield: @Sendable (String) -> Void
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let pairs = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            yield(([event.message.description] + pairs).joined(separator: " "))
        }
    }
}
