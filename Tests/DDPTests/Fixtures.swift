import DDP
import Foundation

enum Fixtures {
    static func url(_ name: String) -> URL {
        Bundle.module.url(forResource: "Fixtures", withExtension: nil)!.appendingPathComponent(name)
    }

    static func lines(_ name: String) throws -> [String] {
        try String(contentsOf: url(name), encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// Every transcript entry, as (file, direction, message) for entries that carry a message.
    static func transcriptMessages() throws -> [(file: String, direction: String, message: EJSON)] {
        let folder = url("transcripts")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".jsonl") }.sorted()
        var out: [(String, String, EJSON)] = []
        for file in files {
            for line in try lines("transcripts/\(file)") {
                let entry = try EJSONParser.parse(line)
                guard let message = entry["msg"], let direction = entry["dir"]?.stringValue else { continue }
                out.append((file, direction, message))
            }
        }
        return out
    }
}
