import ArgumentParser
import Bridge
import DDP
import Foundation
import Logging

/// Checks, once, that the bridge can use the Meteor app at `--upstream`: connects, negotiates
/// DDP, logs in and subscribes when asked; one line per step, and for the first that fails its
/// cause and the fix. Exits 0 when every step succeeded, 1 otherwise.
struct CheckCommand: AsyncParsableCommand {
    /// The settings of `serve` that `check` takes too (flag or `DDP_BRIDGE_…` variable).
    static let settings: Set<String> = [
        "upstream", "upstream-ca-file", "upstream-allow-self-signed", "upstream-compression", "upstream-max-message-size"
    ]

    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check the Meteor app at --upstream once: connect, log in, subscribe; say what to fix. Exits 0 or 1.",
        discussion: "Upstream settings, as for serve (each also read from its DDP_BRIDGE_ variable; a flag wins over it):\n"
            + Settings.helpText(only: settings)
    )

    @Option(help: "Log in as this user (a username, or an email address) after connecting.")
    var username: String?

    @Option(help: "Password for --username (or set DDP_BRIDGE_PASSWORD, which keeps it out of the process list).")
    var password: String?

    @Option(help: "Subscribe to this publication after logging in, and wait until it is ready.")
    var publication: String?

    @Option(help: "The publication's parameters, a JSON array.")
    var params: String = "[]"

    @Option(help: "Seconds each step may take.")
    var timeout: Double = 10

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "critical"

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Upstream settings as --name value (listed below).", valueName: "settings"))
    var arguments: [String] = []

    func run() async throws {
        let options = try checkOptions(environment: ProcessInfo.processInfo.environment)
        let check = UpstreamCheck(options)
        let succeeded = await check.run(logger: try makeLogger(logLevel)) { line in
            FileHandle.standardOutput.write(Data((line.description + "\n").utf8))
        }
        if !succeeded { throw ExitCode(1) }
    }

    /// The check's options from the command line and the environment, each checked.
    func checkOptions(environment: [String: String]) throws -> UpstreamCheck.Options {
        let settings: Settings
        do {
            let flags = try Settings.flags(from: arguments)
            if let other = flags.keys.sorted().first(where: { !Self.settings.contains($0) }) {
                throw Settings.Invalid(description: "check does not take --\(other) (it takes --\(Self.settings.sorted().joined(separator: ", --")))")
            }
            let variables = Set(Settings.all.filter { Self.settings.contains($0.flag) }.map(\.environment))
            settings = try Settings(flags: flags, environment: environment.filter { variables.contains($0.key) })
        } catch let error as Settings.Invalid {
            throw ValidationError(error.description)
        }
        guard timeout.isFinite, (0.1...3600).contains(timeout) else {
            throw ValidationError("--timeout must be a number of seconds from 0.1 to 3600, got \(timeout)")
        }
        let password = password ?? environment["DDP_BRIDGE_PASSWORD"]
        if username != nil, password == nil { throw ValidationError("--username needs --password or DDP_BRIDGE_PASSWORD") }
        let parsed: EJSON
        do {
            parsed = try EJSONParser.parse(params)
        } catch {
            throw ValidationError("--params must be a JSON array, got '\(params)'")
        }
        guard case .array(let list) = parsed else { throw ValidationError("--params must be a JSON array, got '\(params)'") }
        let configuration = settings.configuration
        return UpstreamCheck.Options(
            url: configuration.upstream, tls: configuration.upstreamTLS, compression: configuration.upstreamCompression,
            maxMessageSize: configuration.upstreamMaxMessageSize, username: username, password: password, publication: publication,
            params: list, timeout: .milliseconds(Int64((timeout * 1000).rounded())))
    }
}
