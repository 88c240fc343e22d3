public import Configuration
public import Logging
public import ServiceLifecycle

/// The settings that follow the settings file while the bridge runs: the file is read again when
/// it changes (``SettingsSources/filePollInterval``, or at once on SIGHUP), and `log-level` takes
/// effect at once, unless the command line or the environment sets it. A level that is not one
/// is logged and the level kept. Without a settings file this service only waits for shutdown.
public struct LiveSettings: Service {
    let sources: SettingsSources
    let level: LiveLogLevel
    let logger: Logger

    /// The level when the bridge started (the default's, the presets' or the file's then), which
    /// a file that stops naming a level goes back to.
    let startLevel: Logger.Level

    public init(sources: SettingsSources, level: LiveLogLevel, logger: Logger) {
        self.sources = sources
        self.level = level
        self.startLevel = level.level
        self.logger = logger
    }

    public func run() async throws {
        guard let file = sources.file else {
            try? await gracefulShutdown()
            return
        }
        let (reader, level, logger, path) = (sources.reader, level, logger, sources.filePath ?? "")
        do {
            try await watch(file: file, reader: reader, level: level, logger: logger, path: path)
        } catch  where Task.isCancelled {
            // Shutdown: the watch ends with it.
        }
    }

    func watch(file: ReloadingFileProvider<YAMLSnapshot>, reader: ConfigReader, level: LiveLogLevel, logger: Logger, path: String) async throws {
        try await cancelWhenGracefulShutdown {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { try await file.run() }
                group.addTask {
                    try await reader.watchString(forKey: "log-level") { updates in
                        for await text in updates {
                            // No log-level in the file any more: the level the bridge started with.
                            let text = text.flatMap { ["", "null", "~"].contains($0) ? nil : $0 } ?? startLevel.rawValue
                            guard let new = Logger.Level(rawValue: text) else {
                                logger.warning(
                                    "the settings file's log-level is not a level; the level is kept",
                                    metadata: ["file": "\(path)", "given": "\(text)", "level": "\(level.level)"])
                                continue
                            }
                            guard new != level.level else { continue }
                            let old = level.level
                            level.level = new
                            logger.notice("log level changed", metadata: ["file": "\(path)", "from": "\(old)", "to": "\(new)"])
                        }
                    }
                }
            }
        }
    }
}
