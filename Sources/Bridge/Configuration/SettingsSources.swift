public import Configuration
import Foundation
import Logging
import NIOConcurrencyHelpers
import SystemPackage
import Yams

/// Where the settings are read from, through swift-configuration, in this order (the first that
/// names a setting wins):
/// 1. the command line (`--name value`);
/// 2. the environment (`DDP_BRIDGE_NAME`);
/// 3. the secrets folder (`--secrets-dir`): one file per setting, named as its flag (`session-key`)
///    or its variable (`DDP_BRIDGE_SESSION_KEY`), its content trimmed of surrounding white space;
/// 4. the settings file (`--config`): YAML or JSON, one key per setting named as its flag, a list
///    where the setting takes a comma-separated one; reloaded while the bridge runs;
/// 5. presets (the demo's);
/// 6. the default.
/// `--config` and `--secrets-dir` are read from the first two only.
public struct SettingsSources: Sendable {
    public let reader: ConfigReader
    /// The settings file, watched for changes: a service to run beside the bridge (``LiveSettings``).
    public let file: ReloadingFileProvider<YAMLSnapshot>?
    /// The settings file's path, as given.
    public let filePath: String?
    let failures: LookupFailures

    /// How often the settings file is looked at for a change (it is also read again on SIGHUP).
    public static let filePollInterval: Duration = .seconds(2)

    /// Flags, environment and presets only (no file, no secrets folder).
    public init(flags: [String: String], environment: [String: String], presets: [String: String] = [:]) {
        self.init(flags: flags, environment: environment, presets: presets, secrets: [], file: nil, filePath: nil)
    }

    init(
        flags: [String: String], environment: [String: String], presets: [String: String], secrets: [any ConfigProvider],
        file: ReloadingFileProvider<YAMLSnapshot>?, filePath: String?
    ) {
        let failures = LookupFailures()
        let secretVariables = Set(Settings.all.filter(\.isSecret).map(\.environment))
        var providers: [any ConfigProvider] = [
            InMemoryProvider(name: Source.commandLine, values: Self.values(flags)),
            EnvironmentVariablesProvider(environmentVariables: environment, secretsSpecifier: .specific(secretVariables))
                .prefixKeys(with: ConfigKey(["ddp", "bridge"]))
        ]
        providers += secrets
        if let file { providers.append(file) }
        providers.append(InMemoryProvider(name: Source.presets, values: Self.values(presets)))
        self.reader = ConfigReader(providers: providers, accessReporter: failures)
        self.file = file
        self.filePath = filePath
        self.failures = failures
    }

    /// Every source: `--config` and `--secrets-dir` (from the command line or the environment)
    /// name the file and the folder; a file that cannot be read or parsed, a key in it that is no
    /// setting, and a folder that is not there are refused, naming the setting.
    public static func load(
        flags: [String: String], environment: [String: String], presets: [String: String] = [:],
        fileLog: @escaping @Sendable () -> Logger = { Logger(label: "ddp-bridge") }, filePollInterval: Duration = filePollInterval
    ) async throws(Settings.Invalid) -> SettingsSources {
        let first = SettingsSources(flags: flags, environment: environment)
        var secrets: [any ConfigProvider] = []
        if let folder = try first.text(for: Settings.setting("secrets-dir"))?.text, folder != "none" {
            secrets = [try secretsProvider(folder)]
        }
        var file: ReloadingFileProvider<YAMLSnapshot>?
        let path = try first.text(for: Settings.setting("config"))?.text
        if let path {
            let value = Settings.Value(setting: Settings.setting("config"), text: path)
            let text: String
            do { text = try String(contentsOfFile: path, encoding: .utf8) } catch { throw value.invalid(": cannot read '\(path)'") }
            try checkFile(text, value: value)
            do {
                let log = Logger(label: "settings-file") { _ in SettingsFileLog(path: path, log: fileLog) }
                file = try await ReloadingFileProvider<YAMLSnapshot>(filePath: FilePath(path), pollInterval: filePollInterval, logger: log)
            } catch {
                // Checked as YAML above: what is left is reading it (its text is not quoted: it may hold a secret).
                throw value.invalid(": cannot read '\(path)'")
            }
        }
        return SettingsSources(flags: flags, environment: environment, presets: presets, secrets: secrets, file: file, filePath: path)
    }

    /// The secrets folder's settings: for each setting, the file named as its flag, else as its
    /// variable, its text trimmed of surrounding white space, every value a secret. Links are
    /// followed (a Kubernetes secret volume's files are links into a folder of its own, which
    /// swift-configuration's `DirectoryFilesProvider` passes over); other files are not read.
    static func secretsProvider(_ folder: String) throws(Settings.Invalid) -> InMemoryProvider {
        let value = Settings.Value(setting: Settings.setting("secrets-dir"), text: folder)
        guard Settings.existingFolder(folder) != nil else { throw value.invalid(": '\(folder)' is not a folder") }
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for setting in Settings.all where setting.flag != "config" && setting.flag != "secrets-dir" {
            for name in [setting.flag, setting.environment] {
                let path = folder + "/" + name
                guard FileManager.default.fileExists(atPath: path) else { continue }
                let text: String
                do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
                    throw value.invalid(": cannot read its file \(name) (as UTF-8 text)")
                }
                values[AbsoluteConfigKey([setting.flag])] = ConfigValue(.string(text.trimmingCharacters(in: .whitespacesAndNewlines)), isSecret: true)
                break
            }
        }
        return InMemoryProvider(name: Source.secrets, values: values)
    }

    /// A settings file's keys are settings (not `config` or `secrets-dir`), each a value or a list
    /// of values. JSON is read as YAML, of which it is a part.
    static func checkFile(_ text: String, value: Settings.Value) throws(Settings.Invalid) {
        let node: Node?
        do { node = try Yams.compose(yaml: text) } catch {
            throw value.invalid(": '\(value.text)' is not YAML or JSON (\(Self.describe(error)))")
        }
        guard let node else { return }
        guard let mapping = node.mapping else { throw value.invalid(": '\(value.text)' must hold a mapping of settings (name: value)") }
        let names = Settings.all.map(\.flag)
        for (key, entry) in mapping {
            guard let name = key.string else { throw value.invalid(": '\(value.text)' has a key that is not a name") }
            if name == "config" || name == "secrets-dir" {
                throw value.invalid(": '\(value.text)' sets \(name), which only the command line or the environment may set")
            }
            guard names.contains(name) else {
                let meant = ClosestName.suggestion(for: name, among: names).map { "; did you mean \($0)?" } ?? ""
                throw value.invalid(": '\(value.text)' has \(name), which is no setting\(meant)")
            }
            switch entry {
            case .scalar: break
            case .sequence(let list) where list.allSatisfy({ $0.scalar != nil }): break
            default: throw value.invalid(": '\(value.text)': \(name) must be a value or a list of values")
            }
        }
    }

    /// Where and why a file is not YAML, without the file's text: the parser's own description
    /// quotes the line, which may hold a secret.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? YamlError else { return "unreadable" }
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
            return "line \(mark.line), column \(mark.column): \(problem)"
        case .reader(let problem, let offset, _, _):
            return offset.map { "at byte \($0): \(problem)" } ?? problem
        case .duplicatedKeysInMapping(let duplicates, let context):
            return "line \(context.mark.line): a key given twice (\(duplicates.joined(separator: ", ")))"
        default:
            return "unreadable"
        }
    }

    /// A setting's text and where it came from; `nil` when no source names it. A value a
    /// source has but cannot give as text is refused, naming the setting and the source.
    func text(for setting: Settings.Setting) throws(Settings.Invalid) -> (text: String, source: String)? {
        let key = ConfigKey([setting.flag])
        failures.forget(setting.flag)
        if let text = reader.string(forKey: key, isSecret: setting.isSecret) {
            let source = failures.source(of: setting.flag)
            // `name:` with no value, or null, in the settings file leaves the setting unset.
            if source == Source.settingsFile, ["", "null", "~"].contains(text) { return nil }
            return (text, source)
        }
        if let list = reader.stringArray(forKey: key, isSecret: setting.isSecret) {
            return (list.joined(separator: ","), failures.source(of: setting.flag))
        }
        if let failure = failures.failure(of: setting.flag) {
            throw Settings.Invalid(description: "--\(setting.flag) (\(setting.environment)) cannot be read from \(failure)")
        }
        return nil
    }

    /// The names sources are known by in messages.
    enum Source {
        static let commandLine = "the command line"
        static let presets = "the presets"
        static let secrets = "the secrets folder"
        static let settingsFile = "the settings file"
    }

    static func values(_ texts: [String: String]) -> [AbsoluteConfigKey: ConfigValue] {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for (name, text) in texts {
            let isSecret = Settings.all.first { $0.flag == name }?.isSecret ?? false
            values[AbsoluteConfigKey([name])] = ConfigValue(.string(text), isSecret: isSecret)
        }
        return values
    }
}

/// What swift-configuration reports of each lookup: which source answered, and the failures it
/// keeps to itself (a value of the wrong kind reads as no value).
final class LookupFailures: AccessReporter, Sendable {
    private struct Lookup {
        var source: String?
        var failure: String?
    }

    private let lookups = NIOLockedValueBox<[String: Lookup]>([:])

    func report(_ event: AccessEvent) {
        let name = event.metadata.key.components.joined(separator: ".")
        var lookup = Lookup()
        results: for result in event.providerResults {
            switch result.result {
            case .success(let found) where found.value != nil:
                lookup.source = Self.describe(provider: result.providerName, key: found.encodedKey)
                break results
            case .success: continue
            case .failure(let error):
                lookup.failure = "\(Self.describe(provider: result.providerName, key: nil)): \(error)"
                break results
            }
        }
        if lookup.failure == nil, let error = event.conversionError { lookup.failure = "\(lookup.source ?? "a source"): \(error)" }
        lookups.withLockedValue { lookups in
            // The first failure of a setting's lookups is the one to tell.
            if lookups[name]?.failure != nil, lookup.source == nil { return }
            lookups[name] = lookup
        }
    }

    func forget(_ name: String) { _ = lookups.withLockedValue { $0.removeValue(forKey: name) } }
    func source(of name: String) -> String { lookups.withLockedValue { $0[name]?.source } ?? "a source" }
    func failure(of name: String) -> String? { lookups.withLockedValue { $0[name]?.failure } }

    static func describe(provider: String, key: String?) -> String {
        if provider.contains("ReloadingFileProvider") || provider.contains("FileProvider<") { return SettingsSources.Source.settingsFile }
        if provider.contains(SettingsSources.Source.secrets) { return SettingsSources.Source.secrets }
        if provider.contains("EnvironmentVariablesProvider") { return "the environment" + (key.map { " (\($0))" } ?? "") }
        if provider.contains(SettingsSources.Source.commandLine) { return SettingsSources.Source.commandLine }
        if provider.contains(SettingsSources.Source.presets) { return SettingsSources.Source.presets }
        return provider
    }
}

/// What the settings file's reloading provider says, as the bridge says it. The provider logs a
/// reading that failed at debug level only, with the parser's error, which quotes the file (a
/// secret may be in it). Here: a warning when the file can no longer be read (once until it is
/// read again; never its text), a notice when it is, and a warning when a reading has a key that
/// is no setting; its other lines are dropped. `log` gives the process's logger at the time (its
/// logging is set up after the file is first read).
struct SettingsFileLog: LogHandler {
    let path: String
    let log: @Sendable () -> Logger
    private let failing = NIOLockedValueBox(false)

    init(path: String, log: @escaping @Sendable () -> Logger) {
        self.path = path
        self.log = log
    }

    var metadata: Logger.Metadata = [:]
    /// Every line of the provider reaches ``log(event:)``, which picks what to say.
    var logLevel: Logger.Level {
        get { .debug }
        set {}
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        switch event.message.description {
        case "Reload check failed, will retry on next trigger":
            let wasFailing = failing.withLockedValue { failing in
                defer { failing = true }
                return failing
            }
            guard !wasFailing else { return }
            log().warning("the settings file cannot be read again; the settings read before stay until it can", metadata: ["file": "\(path)"])
        case "Successfully reloaded file":
            let wasFailing = failing.withLockedValue { failing in
                defer { failing = false }
                return failing
            }
            if wasFailing {
                log().notice("the settings file is read again", metadata: ["file": "\(path)"])
            }
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return }
            do throws(Settings.Invalid) {
                try SettingsSources.checkFile(text, value: Settings.Value(setting: Settings.setting("config"), text: path))
            } catch {
                log().warning(
                    "the settings file, read again, would stop the bridge at its next start", metadata: ["problem": "\(error.description)"])
            }
        default:
            return
        }
    }
}
