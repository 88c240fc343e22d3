import DDP
import Foundation

// Micro-benchmarks of the EJSON/DDP hot path against Foundation's JSON, in one process.
// Prints a table and writes bench-results/ejson.json. Usage: ddp-bench [seconds-per-run] [output-dir]

let arguments = CommandLine.arguments
let secondsPerRun = arguments.count > 1 ? Double(arguments[1]) ?? 0.3 : 0.3
let outputDirectory = arguments.count > 2 ? arguments[2] : "bench-results"
let runs = 5

/// Representative frames: a document add (~250 B), a ticker change (~70 B), a login result.
let frames: [String] = [
    #"{"msg":"added","collection":"tasks","id":"task-a1","fields":{"text":"alice inbox task","listId":"inbox","owner":"vEjSEFLq7wmvpsNB3","done":false,"createdAt":{"$date":1704067200000}}}"#,
    #"{"msg":"changed","collection":"ticks","id":"t1","fields":{"n":12345}}"#,
    #"{"msg":"result","id":"m1","result":{"id":"bkiPSWzk5wGxu3TZY","token":"sSUnyZm3P1HqrTpAgMS5VdripOUvG5rxeJk-KkCPtqn","tokenExpires":{"$date":1803087863077},"type":"password"}}"#,
]
let frameBytes = frames.map { Array($0.utf8) }
let frameData = frames.map { Data($0.utf8) }
let decoded = try frameBytes.map { try ServerMessage.decode(bytes: $0)! }
let foundationObjects = try frameData.map { try JSONSerialization.jsonObject(with: $0) }

/// Runs `body` (which handles `frames.count` messages) repeatedly; returns messages per second.
@MainActor func measure(_ body: () throws -> Void) rethrows -> Double {
    var iterations = 0
    let start = ContinuousClock.now
    let budget = Duration.milliseconds(Int64(secondsPerRun * 1000))
    while ContinuousClock.now - start < budget {
        for _ in 0..<100 { try body() }
        iterations += 100
    }
    let elapsed = (ContinuousClock.now - start).seconds
    return Double(iterations * frames.count) / elapsed
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

struct Row: Codable {
    let name: String
    let messagesPerSecond: Double
    let baseline: String
    let ratio: Double
}

var rows: [Row] = []
@MainActor func compare(_ name: String, ours: () throws -> Void, baselineName: String, baseline: () throws -> Void) rethrows {
    var oursRuns: [Double] = []
    var baseRuns: [Double] = []
    for _ in 0..<runs {
        oursRuns.append(try measure(ours))
        baseRuns.append(try measure(baseline))
    }
    let o = median(oursRuns), b = median(baseRuns)
    rows.append(Row(name: name, messagesPerSecond: o, baseline: baselineName, ratio: o / b))
    rows.append(Row(name: baselineName, messagesPerSecond: b, baseline: baselineName, ratio: 1))
}

var sink = 0
try compare("EJSON parse + DDP decode (ours)", ours: {
    for bytes in frameBytes {
        let message = try ServerMessage.decode(bytes: bytes)
        if message != nil { sink &+= 1 }
    }
}, baselineName: "JSONSerialization parse only", baseline: {
    for data in frameData {
        let object = try JSONSerialization.jsonObject(with: data)
        if object is NSDictionary { sink &+= 1 }
    }
})
try compare("DDP encode + EJSON serialize (ours)", ours: {
    for message in decoded { sink &+= message.encode().count }
}, baselineName: "JSONSerialization serialize", baseline: {
    for object in foundationObjects { sink &+= try JSONSerialization.data(withJSONObject: object).count }
})

let commit = ProcessInfo.processInfo.environment["GIT_COMMIT"] ?? "unknown"
let machine = "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB"
print("EJSON hot path, median of \(runs) runs of \(secondsPerRun) s, \(machine), commit \(commit)")
print("| benchmark | messages/s | vs baseline |")
print("|---|---:|---:|")
for row in rows {
    print("| \(row.name) | \(Int(row.messagesPerSecond)) | \(row.ratio == 1 ? "baseline" : String(format: "%.2f×", row.ratio)) |")
}
struct Report: Codable {
    let date: String
    let commit: String
    let machine: String
    let rows: [Row]
}
let report = Report(date: ISO8601DateFormatter().string(from: Date()), commit: commit, machine: machine, rows: rows)
try FileManager.default.createDirectory(atPath: outputDirectory, withIntermediateDirectories: true)
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
try encoder.encode(report).write(to: URL(fileURLWithPath: outputDirectory).appendingPathComponent("ejson.json"))
if sink == 42 { print("") }
