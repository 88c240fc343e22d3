public import Logging
import Synchronization

/// The process's log level, one for every logger made after ``LiveLogLevel/bootstrap(format:level:)``,
/// changed at run time (the settings file's `log-level`, ``LiveSettings``).
public final class LiveLogLevel: Sendable {
    private let index: Atomic<Int>

    public init(_ level: Logger.Level) { index = Atomic(Self.levels.firstIndex(of: level) ?? 2) }

    public var level: Logger.Level {
        get { Self.levels[index.load(ordering: .relaxed)] }
        set { index.store(Self.levels.firstIndex(of: newValue) ?? 2, ordering: .relaxed) }
    }

    static let levels = Logger.Level.allCases

    /// Makes every logger of the process write `format` (`human` or `json`) at this level, with
    /// the metadata `provider` adds to each line (the trace's ids), and returns the process logger.
    public func bootstrap(format: String, metadata provider: Logger.MetadataProvider? = nil) -> Logger {
        LoggingSystem.bootstrap(
            { [self] label, provider in
                let inner: any LogHandler =
                    format == "json"
                    ? JSONLogHandler(label: label, metadataProvider: provider)
                    : StreamLogHandler.standardError(label: label, metadataProvider: provider)
                return Handler(inner: inner, level: self)
            }, metadataProvider: provider)
        return Logger(label: "ddp-bridge")
    }

    /// A handler at the shared level, unless its own logger was given one (a component that
    /// logs less, say): that logger then keeps its own.
    struct Handler: LogHandler {
        var inner: any LogHandler
        let level: LiveLogLevel
        var own: Logger.Level?

        init(inner: any LogHandler, level: LiveLogLevel) {
            self.inner = inner
            self.level = level
        }

        var logLevel: Logger.Level {
            get { own ?? level.level }
            set { own = newValue }
        }

        var metadata: Logger.Metadata {
            get { inner.metadata }
            set { inner.metadata = newValue }
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { inner[metadataKey: key] }
            set { inner[metadataKey: key] = newValue }
        }

        func log(event: LogEvent) { inner.log(event: event) }
    }
}
