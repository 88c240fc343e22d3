import Bridge
import DDP
import Foundation
import NIOCore

/// Micro-benchmarks of the hot paths, each against a baseline measured in the same process:
/// EJSON parse + DDP decode and serialize (against Foundation's JSON), cache apply, selector
/// match and SSE encoding (rates; their baseline is the parse of the same message).
enum Micro {
    /// Representative frames: a document add (~250 B), a ticker change (~70 B), a login result.
    static let frames: [String] = [
        #"{"msg":"added","collection":"tasks","id":"task-a1","fields":{"text":"alice inbox task","listId":"inbox","owner":"vEjSEFLq7wmvpsNB3","done":false,"createdAt":{"$date":1704067200000}}}"#,
        #"{"msg":"changed","collection":"ticks","id":"t1","fields":{"n":12345}}"#,
        #"{"msg":"result","id":"m1","result":{"id":"bkiPSWzk5wGxu3TZY","token":"sSUnyZm3P1HqrTpAgMS5VdripOUvG5rxeJk-KkCPtqn","tokenExpires":{"$date":1803087863077},"type":"password"}}"#
    ]

    static func run(secondsPerRun: Double, runs: Int) throws -> [Figure] {
        let frameBytes = frames.map { Array($0.utf8) }
        let frameData = frames.map { Data($0.utf8) }
        let decoded = try frameBytes.map { try ServerMessage.decode(bytes: $0)! }
        let foundationObjects = try frameData.map { try JSONSerialization.jsonObject(with: $0) }
        var sink = 0
        var figures: [Figure] = []

        /// Operations per second of `body` (which does `perCall` operations), median of `runs`.
        func rate(perCall: Int, _ body: () throws -> Void) rethrows -> Double {
            var results: [Double] = []
            for _ in 0..<runs {
                var calls = 0
                let start = ContinuousClock.now
                let budget = Duration.milliseconds(Int64(secondsPerRun * 1000))
                while ContinuousClock.now - start < budget {
                    for _ in 0..<50 { try body() }
                    calls += 50
                }
                results.append(Double(calls * perCall) / (ContinuousClock.now - start).seconds)
            }
            return Stats.median(results)
        }

        let parse = try rate(perCall: frames.count) {
            for bytes in frameBytes where try ServerMessage.decode(bytes: bytes) != nil { sink &+= 1 }
        }
        let foundationParse = try rate(perCall: frames.count) {
            for data in frameData where try JSONSerialization.jsonObject(with: data) is NSDictionary { sink &+= 1 }
        }
        figures.append(
            Figure("micro", "EJSON parse + DDP decode", parse, "msg/s", baseline: "JSONSerialization parse only", baselineValue: foundationParse))
        let encode = rate(perCall: frames.count) { for message in decoded { sink &+= message.encode().count } }
        let foundationEncode = try rate(perCall: frames.count) {
            for object in foundationObjects { sink &+= try JSONSerialization.data(withJSONObject: object).count }
        }
        figures.append(
            Figure("micro", "DDP encode + EJSON serialize", encode, "msg/s", baseline: "JSONSerialization serialize", baselineValue: foundationEncode)
        )

        // Cache apply: a changed message on a cached document (the ticker's path).
        var cache = DocumentCache()
        _ = cache.apply(.added(collection: "ticks", id: "t1", fields: ["n": 0, "rate": 10, "count": 0]))
        let changes = (1...100).map { ServerMessage.changed(collection: "ticks", id: "t1", fields: ["n": .int($0)], cleared: []) }
        let apply = rate(perCall: changes.count) {
            for change in changes where cache.apply(change) != nil { sink &+= 1 }
        }
        figures.append(Figure("micro", "document cache apply (changed)", apply, "changes/s"))

        // Selector match over a task document.
        let selector = try Selector(try EJSONParser.parse(#"{"listId":"inbox","done":{"$ne":true},"text":{"$in":["a","alice inbox task"]}}"#))
        guard
            case .object(let document)? = try? EJSONParser.parse(
                #"{"_id":"task-a1","text":"alice inbox task","listId":"inbox","owner":"vEjSEFLq7wmvpsNB3","done":false}"#)
        else {
            throw BenchError("the selector benchmark's document did not parse")
        }
        let match = rate(perCall: 100) { for _ in 0..<100 where selector.matches(document) { sink &+= 1 } }
        figures.append(Figure("micro", "selector match (3 conditions)", match, "docs/s"))

        // SSE encoding: a change's event, its payload built and framed.
        let change = DocumentChange.changed(collection: "tasks", id: "task-a1", fields: ["done": true], cleared: [], previous: ["done": false])
        let sse = rate(perCall: 100) {
            for i in 0..<100 { sink &+= SessionEvent.document(change, document: nil, id: UInt64(i)).frame.readableBytes }
        }
        figures.append(Figure("micro", "SSE event encode (changed)", sse, "events/s"))
        if sink == 42 { print("") }
        return figures
    }
}
