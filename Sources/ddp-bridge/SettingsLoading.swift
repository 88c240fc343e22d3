import ArgumentParser
import Bridge
import Foundation
import Logging
import ServiceLifecycle
import Tracing

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

    /// The settings naming what the bridge listens on, for a port it cannot take.
    static func listeners(_ settings: Settings) -> String {
        settings.configuration.metricsListener == nil
            ? "--port, DDP_BRIDGE_PORT" : "--port or --metrics-port, DDP_BRIDGE_PORT or DDP_BRIDGE_METRICS_PORT"
    }

    /// What a bad setting prints: the error, then the command's usage.
    static func refusal<Command: ParsableCommand>(_ error: Settings.Invalid, for command: Command.Type) -> String {
        let name = command.configuration.commandName ?? "serve"
        return "Error: \(error.description)\nUsage: \(DDPBridgeCommand.usageString(for: command))\n"
            + "  See 'ddp-bridge \(name) --help' for more information.\n"
    }

    /// The process's logs at the level set, which the settings file may change while it runs,
    /// and its traces when tracing is on (``TraceExport``): the service that exports them, to
    /// run first (so it stops last, after the last span), and the log lines carry their ids.
    func startLogging<Command: ParsableCommand>(for command: Command.Type) throws -> (logger: Logger, level: LiveLogLevel, tracing: (any Service)?) {
        let level = LiveLogLevel(Logger.Level(rawValue: settings.logLevel) ?? .info)
        let environment = ProcessInfo.processInfo.environment
        let tracingOn = TraceExport.isOn(endpoint: settings.otlpEndpoint, environment: environment)
        let logger = level.bootstrap(format: settings.logFormat, metadata: tracingOn ? TraceExport.loggingMetadata : nil)
        let tracing: (tracer: any Tracer, service: any Service, endpoint: String)?
        do throws(Settings.Invalid) {
            tracing = try TraceExport.backend(endpoint: settings.otlpEndpoint, environment: environment, logger: logger)
        } catch {
            FileHandle.standardError.write(Data(Self.refusal(error, for: command).utf8))
            throw ExitCode.validationFailure
        }
        if let tracing {
            InstrumentationSystem.bootstrap(tracing.tracer)
            logger.info("traces are exported over OTLP/HTTP", metadata: ["endpoint": "\(tracing.endpoint)"])
        }
        return (logger, level, tracing?.service)
    }
}
