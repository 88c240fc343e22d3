import Bridge
import Foundation
import Testing

@Suite struct SettingsTests {
    let upstream = ["upstream": "ws://meteor:3000/websocket"]

    @Test func defaultsAreProductionDefaults() throws {
        let settings = try Settings(flags: upstream, environment: [:])
        #expect(settings.host == "127.0.0.1" && settings.port == 8080 && settings.logLevel == "info")
        #expect(settings.configuration.upstream == "ws://meteor:3000/websocket")
        #expect(settings.configuration.sessionIdleTimeout == .seconds(900))
        #expect(settings.configuration.loginRateLimit.calls == 10)
        #expect(settings.configuration.heartbeatInterval == .seconds(15))
        #expect(settings.configuration.batchWindow == .milliseconds(1))
        #expect(settings.configuration.readTimeout == .seconds(30) && settings.configuration.shutdownGrace == .seconds(10))
    }

    /// The tools file is read at start: the demo's example offers its methods.
    @Test func theMCPToolsFileIsReadAtStart() throws {
        let settings = try Settings(flags: upstream.merging(["mcp-tools": "examples/mcp-tools.json"]) { $1 }, environment: [:])
        #expect(settings.configuration.mcpTools.methods.map(\.tool) == ["echo", "whoami"])
        let none = try Settings(flags: upstream, environment: [:])
        #expect(none.configuration.mcpTools.methods.isEmpty && !none.configuration.mcpTools.callMethod)
    }

    @Test func aFlagWinsOverTheEnvironmentWhichWinsOverTheDefault() throws {
        let environment = [
            "DDP_BRIDGE_UPSTREAM": "ws://env:3000/websocket", "DDP_BRIDGE_PORT": "9000", "DDP_BRIDGE_HOST": "0.0.0.0",
            "DDP_BRIDGE_MAX_SESSIONS": "5", "DDP_BRIDGE_UPSTREAM_COMPRESSION": "true"
        ]
        let fromEnvironment = try Settings(flags: [:], environment: environment)
        #expect(fromEnvironment.configuration.upstream == "ws://env:3000/websocket")
        #expect(fromEnvironment.port == 9000 && fromEnvironment.host == "0.0.0.0")
        #expect(fromEnvironment.configuration.maxSessions == 5 && fromEnvironment.configuration.upstreamCompression)
        let flagged = try Settings(flags: ["upstream": "wss://flag.example/websocket", "port": "7000"], environment: environment)
        #expect(flagged.configuration.upstream == "wss://flag.example/websocket")
        #expect(flagged.port == 7000 && flagged.host == "0.0.0.0")
    }

    @Test(arguments: [
        ([:], "--upstream (DDP_BRIDGE_UPSTREAM) is required"),
        (["upstream": "http://meteor:3000"], "--upstream (DDP_BRIDGE_UPSTREAM) must be a ws:// or wss:// URL"),
        (["upstream": "wss://10.0.0.5/websocket"], "--upstream (DDP_BRIDGE_UPSTREAM) must name a host, not an IP address"),
        (
            ["upstream": "http://localhost:3000/websocket"],
            "--upstream (DDP_BRIDGE_UPSTREAM) must be a ws:// or wss:// URL (Meteor serves DDP over WebSocket at /websocket), got 'http://localhost:3000/websocket': use ws://localhost:3000/websocket"
        ),
        (
            ["upstream": "https://app.example/"],
            "--upstream (DDP_BRIDGE_UPSTREAM) must be a ws:// or wss:// URL (Meteor serves DDP over WebSocket at /websocket), got 'https://app.example/': use wss://app.example/websocket"
        ),
        (["upstream": "ws://m:0/websocket"], "--upstream (DDP_BRIDGE_UPSTREAM) must have a port from 1 to 65535"),
        (["upstream": "ws://m:65536/websocket"], "--upstream (DDP_BRIDGE_UPSTREAM) must have a port from 1 to 65535"),
        (["upstream": "ws://m:99999999999999999999/websocket"], "--upstream (DDP_BRIDGE_UPSTREAM) must have a port from 1 to 65535"),
        (["upstream": "ws://[::1]:70000/websocket"], "--upstream (DDP_BRIDGE_UPSTREAM) must have a port from 1 to 65535"),
        (["upstream": "ws://m/websocket", "port": "70000"], "--port (DDP_BRIDGE_PORT) must be a whole number from 0 to 65535"),
        (["upstream": "ws://m/websocket", "max-sessions": "none"], "--max-sessions (DDP_BRIDGE_MAX_SESSIONS) must be a whole number"),
        (["upstream": "ws://m/websocket", "request-timeout": "-1"], "--request-timeout (DDP_BRIDGE_REQUEST_TIMEOUT) must be a number"),
        (["upstream": "ws://m/websocket", "read-timeout": "0"], "--read-timeout (DDP_BRIDGE_READ_TIMEOUT) must be a number from 0.1 to"),
        (
            ["upstream": "ws://m/websocket", "trust-forwarded-for": "perhaps"],
            "--trust-forwarded-for (DDP_BRIDGE_TRUST_FORWARDED_FOR) must be true or false"
        ),
        (["upstream": "ws://m/websocket", "log-level": "loud"], "--log-level (DDP_BRIDGE_LOG_LEVEL) must be trace, debug"),
        (["upstream": "ws://m/websocket", "log-format": "xml"], "--log-format (DDP_BRIDGE_LOG_FORMAT) must be human or json"),
        (["upstream": "ws://m/websocket", "cors-origins": "app.example"], "--cors-origins (DDP_BRIDGE_CORS_ORIGINS): 'app.example' is not an origin"),
        (["upstream": "ws://m/websocket", "public-dir": "/nonexistent"], "--public-dir (DDP_BRIDGE_PUBLIC_DIR): '/nonexistent' is not a folder"),
        (
            ["upstream": "wss://m/websocket", "upstream-ca-file": "/nonexistent/ca.pem"],
            "--upstream-ca-file (DDP_BRIDGE_UPSTREAM_CA_FILE): cannot read"
        ),
        (["upstream": "ws://m/websocket", "mcp-tools": "/nonexistent/tools.json"], "--mcp-tools (DDP_BRIDGE_MCP_TOOLS): cannot read"),
        (["upstream": "ws://m/websocket", "mcp-tools": "Package.swift"], "--mcp-tools (DDP_BRIDGE_MCP_TOOLS): not valid JSON"),
        (
            ["upstream": "ws://m/websocket", "mcp-allowed-origins": "agent.example"],
            "--mcp-allowed-origins (DDP_BRIDGE_MCP_ALLOWED_ORIGINS): 'agent.example' is not an origin"
        ),
        (["upstream": "ws://m/websocket", "mcp-path": "mcp"], "--mcp-path (DDP_BRIDGE_MCP_PATH): 'mcp' is not a path"),
        (["upstream": "ws://m/websocket", "mcp-path": "/v1/mcp"], "--mcp-path (DDP_BRIDGE_MCP_PATH): '/v1/mcp' is one of the bridge's own paths"),
        (["upstream": "ws://m/websocket", "mcp-notify-interval": "0"], "--mcp-notify-interval (DDP_BRIDGE_MCP_NOTIFY_INTERVAL) must be a number")
    ])
    func badSettingsFailNamingTheSetting(flags: [String: String], message: String) {
        do {
            _ = try Settings(flags: flags, environment: [:])
            Issue.record("\(flags) must be refused")
        } catch {
            #expect(error.description.hasPrefix(message), "\(error.description)")
        }
    }

    @Test func everySettingHasAFlagAnEnvironmentVariableAndHelp() {
        let flags = Settings.all.map(\.flag)
        #expect(Set(flags).count == flags.count)
        for setting in Settings.all {
            #expect(setting.environment.hasPrefix("DDP_BRIDGE_") && !setting.help.isEmpty)
        }
    }

    @Test(arguments: [
        ("connect-timeout", "1e300"), ("request-timeout", "inf"), ("shutdown-grace", "-1"), ("batch-window", "1e20"),
        ("max-sessions", "99999999999999999999"), ("reconnect-rate", "nan"), ("upstream-max-message-size", "8589934592"),
        ("heartbeat-interval", "1e-9")
    ])
    func outOfRangeNumbersAreRefusedAtStartNeverTrapped(flag: String, value: String) {
        // Before the fix `--connect-timeout 1e300` trapped converting to Int64.
        #expect(throws: Settings.Invalid.self) { try Settings(flags: upstream.merging([flag: value]) { $1 }, environment: [:]) }
    }

    @Test func trustedProxiesAreParsedAndValidated() throws {
        let settings = try Settings(flags: upstream.merging(["trusted-proxies": "10.0.0.0/8, ::1"]) { $1 }, environment: [:])
        #expect(settings.configuration.trustedProxies == [IPRange("10.0.0.0/8")!, IPRange("::1")!])
        #expect(throws: Settings.Invalid.self) { try Settings(flags: upstream.merging(["trusted-proxies": "10.0.0.0/99"]) { $1 }, environment: [:]) }
    }

    @Test func reliabilitySettingsHaveDefaultsAndVariables() throws {
        let settings = try Settings(flags: upstream, environment: [:])
        #expect(settings.configuration.reconnectRate == 100 && settings.configuration.reconnectBurst == 50)
        #expect(settings.configuration.upstreamMaxMessageSize == 16 << 20)
        #expect(settings.configuration.sessionRateLimit.calls == 100 && settings.configuration.loginRateLimit.interval == .seconds(60))
        let tuned = try Settings(flags: upstream, environment: ["DDP_BRIDGE_RECONNECT_RATE": "5", "DDP_BRIDGE_UPSTREAM_MAX_MESSAGE_SIZE": "2048"])
        #expect(tuned.configuration.reconnectRate == 5 && tuned.configuration.upstreamMaxMessageSize == 2048)
    }

    @Test func commandLinesTakeEverySettingAsAFlag() throws {
        let flags = try Settings.flags(from: [
            "--port", "9000", "--host=0.0.0.0", "--upstream-compression", "--trust-forwarded-for", "false",
            "--cors-origins", "*"
        ])
        #expect(flags == ["port": "9000", "host": "0.0.0.0", "upstream-compression": "true", "trust-forwarded-for": "false", "cors-origins": "*"])
        #expect(try Settings.flags(from: ["--upstream-compression", "--port", "1"]) == ["upstream-compression": "true", "port": "1"])
        for (arguments, message) in [
            (["--prot", "9000"], "unknown setting --prot"), (["--port"], "--port needs a value"),
            (["9000"], "unexpected argument (the 1st of the command's settings)")
        ] {
            #expect { try Settings.flags(from: arguments) } throws: { ($0 as? Settings.Invalid)?.description.hasPrefix(message) == true }
        }
    }

    @Test(arguments: [
        (["--upstrem", "ws://m/websocket"], [], "unknown setting --upstrem; did you mean --upstream?"),
        (["--port", "1", "--hots=0.0.0.0"], [], "unknown setting --hots; did you mean --host?"),
        (["--Public-Dir", "none"], [], "unknown setting --Public-Dir; did you mean --public-dir?"),
        (["--ddp-prot", "3000"], ["ddp-port", "watch"], "unknown setting --ddp-prot; did you mean --ddp-port?"),
        (["--wacth"], ["ddp-port", "watch"], "unknown setting --wacth; did you mean --watch?"),
        (["--frobnicate", "1"], [], "unknown setting --frobnicate (see --help for the settings)")
    ])
    func anUnknownSettingNamesTheOneItMostLikelyMeant(arguments: [String], others: [String], message: String) {
        #expect { try Settings.flags(from: arguments, otherFlags: others) } throws: { ($0 as? Settings.Invalid)?.description == message }
    }

    @Test func closestNamesAreNearAndNeverTheNameItself() {
        let collections = ["lists", "tasks", "ticks", "users"]
        #expect(ClosestName.suggestion(for: "task", among: collections) == "tasks")
        #expect(ClosestName.suggestion(for: "tsaks", among: collections) == "tasks", "a swap of neighbours is one edit")
        #expect(ClosestName.suggestion(for: "Tasks", among: collections) == "tasks", "case is ignored")
        #expect(ClosestName.suggestion(for: "tasks", among: ["tasks"]) == nil)
        #expect(ClosestName.suggestion(for: "tasks", among: collections) == nil, "ticks is two edits away: too far for five letters")
        #expect(ClosestName.suggestion(for: "orders", among: collections) == nil)
        #expect(ClosestName.suggestion(for: "a", among: ["b", "ab"]) == "b", "the nearest first, ties to the earlier")
        #expect(ClosestName.suggestion(for: "", among: collections) == nil)
        #expect(ClosestName.suggestion(for: String(repeating: "x", count: 10_000), among: collections) == nil)
    }

    @Test func helpTextWrapsAtWordBoundariesUnderItsIndent() {
        let text =
            "Serve REST and Server-Sent Events for the Meteor app at --upstream, wrapped at word boundaries.\nStill the same paragraph.\n\nA second one."
        let wrapped = HelpText.wrap(text, indent: 6, width: 40)
        let lines = wrapped.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.contains(""), "paragraphs stay apart: \(wrapped)")
        for line in lines where !line.isEmpty {
            #expect(line.count <= 40 && line.hasPrefix("      ") && !line.hasPrefix("       "), "\(line)")
        }
        #expect(wrapped.contains("Server-Sent Events") && wrapped.contains("Meteor app"), "phrases are kept whole: \(wrapped)")
        #expect(
            wrapped.replacingOccurrences(of: "\n", with: " ").split(separator: " ").joined(separator: " ")
                == text.replacingOccurrences(
                    of: "\n", with: " "
                ).split(separator: " ").joined(separator: " "))
        // The settings' help: every line fits a terminal of 80 columns with its break.
        for line in Settings.helpText().split(separator: "\n") {
            #expect(line.count <= HelpText.width && (line.hasPrefix("  --") || line.hasPrefix("      ")), "\(line)")
        }
    }

    @Test func presetsSitBetweenTheEnvironmentAndTheDefault() throws {
        // The demo's way: its presets yield to DDP_BRIDGE_ variables and flags.
        let preset = try Settings(flags: upstream, environment: [:], presets: ["log-level": "notice", "port": "9100"])
        #expect(preset.logLevel == "notice" && preset.port == 9100)
        let overridden = try Settings(
            flags: upstream.merging(["port": "9300"]) { $1 }, environment: ["DDP_BRIDGE_LOG_LEVEL": "debug"],
            presets: ["log-level": "notice", "port": "9100"])
        #expect(overridden.logLevel == "debug" && overridden.port == 9300)
    }

    @Test func helpShowsEachSettingsVariableAndItsDefaultFromTheConfiguration() {
        let help = Settings.helpText()
        for setting in Settings.all { #expect(help.contains("--\(setting.flag) ") && help.contains("env \(setting.environment)")) }
        let defaults = BridgeConfiguration(upstream: "")
        #expect(help.contains("env DDP_BRIDGE_MAX_SESSIONS, default \(defaults.maxSessions)\n"))
        #expect(help.contains("env DDP_BRIDGE_CONNECT_TIMEOUT, default 10\n") && defaults.connectTimeout == .seconds(10))
        #expect(help.contains("env DDP_BRIDGE_BATCH_WINDOW, default 1\n") && defaults.batchWindow == .milliseconds(1))
        #expect(help.contains("env DDP_BRIDGE_SESSION_MAX_DOCUMENTS, default 100000\n"))
        #expect(!Settings.helpText(excluding: ["upstream"]).contains("--upstream "))
    }
}
