import DDP
import Foundation
public import Logging
public import Timing

/// One JSON object per line (`time`, `level`, `label`, `message`, metadata, `source`), for log
/// collectors. Chosen with `--log-format json`.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let write: @Sendable ([UInt8]) -> Void
    let clock: BridgeClock

    public init(
        label: String, clock: BridgeClock = .system, metadataProvider: Logger.MetadataProvider? = nil,
        write: @escaping @Sendable ([UInt8]) -> Void = { FileHandle.standardError.write(Data($0)) }
    ) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.clock = clock
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(
        level: Logger.Level, message: Logger.Message, metadata extra: Logger.Metadata?,
        source: String, file: String, function: String, line: UInt
    ) {
        var object: EJSONObject = [
            "time": .string(clock.wallClock.formatted(.iso8601)),
            "level": .string(level.rawValue),
            "label": .string(label),
            "message": .string(message.description)
        ]
        let provided = metadataProvider?.get() ?? [:]
        for (key, value) in provided.merging(metadata, uniquingKeysWith: { $1 }).merging(extra ?? [:], uniquingKeysWith: { $1 })
            .sorted(by: { $0.key < $1.key })
        {
            object[key] = .string(value.description)
        }
        object["source"] = .string(source)
        var bytes = EJSONWriter.encode(.object(object))
        bytes.append(0x0A)
        write(bytes)
    }
}
