import ArgumentParser
import Bridge
import Foundation
import Logging

/// The settings of `serve` and `demo` from every source (``SettingsSources``): the command line,
/// the environment, the secrets folder, the settings file, the command's presets. A bad one ends
/// the process before anything starts, with the command's usage, as the parser's own errors do.
struct LoadedSettings {
    let settings: Settings
    let sources: SettingsSources

    static func load<Command: ParsableCommand>(
        for command: Command.Type, flags: [String: String], environment: [String: String] = ProcessInfo.processInfo.environment,
        presets: [String: String] = [:]
    ) async throws -> LoadedSettings {
        do throws(Settings.Invalid) {
            return try await resolve(flags: flags, environment: environment, presets: presets)
        } catch {
            FileHandle.standardError.write(Data(refusal(error, for: command).utf8))
            throw ExitCode.validationFailure
        }
    }

    static func resolve(flags: [String: String], environment: [String: String], presets: [String: String] = [:]) async throws(Settings.Invalid)
        -> LoadedSettings
    {
        let sources = try await SettingsSources.load(flags: flags, environment: environment, presets: presets)
        return LoadedSettings(settings: try Settings(sources: sources), sources: sources)
    }

    /// What a bad setting prints: the error, then the command's usage.
    static func refusal<Command: ParsableCommand>(_ error: Settings.Invalid, for command: Command.Type) -> String {
        let name = command.configuration.commandName ?? "serve"
        return "Error: \(error.description)\nUsage: \(DDPBridgeCommand.usageString(for: command))\n"
            + "  See 'ddp-bridge \(name) --help' for more information.\n"
    }

    /// The process's logs at the level set, which the settings file may change while it runs.
    func startLogging() -> (logger: Logger, level: LiveLogLevel) {
        let level = LiveLogLevel(Logger.Level(rawValue: settings.logLevel) ?? .info)
        return (level.bootstrap(format: settings.logFormat), level)
    }
}
