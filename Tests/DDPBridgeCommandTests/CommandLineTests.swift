import ArgumentParser
import Bridge
import Testing

@testable import ddp_bridge

/// What a user sees of the command line: a mistyped setting is answered with the setting it
/// most likely meant and the usage of the command it was given to; help wraps at word
/// boundaries and keeps each setting's help under its flag.
@Suite struct CommandLineTests {
    @Test(arguments: [
        (["serve", "--upstrem", "ws://meteor:3000/websocket"], "--upstrem; did you mean --upstream?", "ddp-bridge serve"),
        (["--upstrem", "ws://meteor:3000/websocket"], "--upstrem; did you mean --upstream?", "ddp-bridge serve"),
        (["serve", "--upstream", "ws://meteor:3000/websocket", "--prot", "9000"], "--prot; did you mean --port?", "ddp-bridge serve"),
        (["demo", "--ddp-prot", "3000"], "--ddp-prot; did you mean --ddp-port?", "ddp-bridge demo"),
        (["demo", "--publik-dir", "none"], "--publik-dir; did you mean --public-dir?", "ddp-bridge demo")
    ])
    func anUnknownSettingNamesTheOneMeantAndTheCommandsUsage(arguments: [String], unknown: String, usage: String) {
        do {
            _ = try DDPBridgeCommand.parseAsRoot(arguments)
            Issue.record("\(arguments) must be refused")
        } catch {
            let message = DDPBridgeCommand.fullMessage(for: error)
            #expect(message.contains("Error: unknown setting \(unknown)"), "\(message)")
            #expect(message.contains("Usage: \(usage) "), "\(message)")
            #expect(!message.contains("<subcommand>"), "the top-level usage: \(message)")
            #expect(DDPBridgeCommand.exitCode(for: error) == .validationFailure)
        }
    }

    @Test func aBadValueIsReportedWithTheCommandsUsageToo() async throws {
        let flags = try Settings.flags(from: ["--upstream", "ws://meteor:3000/websocket", "--port", "70000"])
        do {
            _ = try await LoadedSettings.resolve(flags: flags, environment: [:])
            Issue.record("port 70000 must be refused")
        } catch {
            let message = LoadedSettings.refusal(error, for: ServeCommand.self)
            #expect(message.contains("Error: --port (DDP_BRIDGE_PORT) must be a whole number from 0 to 65535"), "\(message)")
            #expect(message.contains("Usage: ddp-bridge serve "), "\(message)")
            #expect(!message.contains("<subcommand>"), "\(message)")
        }
    }

    @Test func helpWrapsAtWordBoundariesAndKeepsPhrasesAndIndentsWhole() {
        let commands: [any ParsableCommand.Type] = [DDPBridgeCommand.self, ServeCommand.self, DemoCommand.self, DemoServerCommand.self]
        for command in commands {
            let help = DDPBridgeCommand.helpMessage(for: command, columns: 80)
            let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
            // The usage line is the parser's own, never wrapped.
            for line in lines where !line.hasPrefix("USAGE:") {
                #expect(line.count <= 80, "\(command): \(line)")
                #expect(!line.hasSuffix("Server-Sent") && !line.hasPrefix("Events"), "\(command) splits a phrase: \(line)")
            }
            guard command == ServeCommand.self || command == DemoCommand.self else { continue }
            // Each setting's lines stay under its flag: none falls back to the left margin.
            let settings = lines.drop { !$0.hasPrefix("  --") }.prefix { !$0.hasPrefix("USAGE:") }
            #expect(settings.count > 3 * (Settings.all.count - 1), "\(command)'s help lists the settings: \(help)")
            for line in settings where !line.isEmpty {
                #expect(line.hasPrefix("  --") || line.hasPrefix("      "), "\(command): \(line)")
            }
        }
    }
}
