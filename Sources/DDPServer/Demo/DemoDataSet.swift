public import DDP
import Foundation

/// The data set the recorded transcripts use (the fixtures in `Tests/DDPServerTests/Fixtures`), for
/// tests, the demo mode and benchmarks: users alice and bob, a `tasks` collection, the
/// publications `tasks`, `myTasks`, `ticker`, `bulk`, `failing`, `typed`, the current
/// user's document, and the methods `echo`, `boom`, `crash`, `whoami`, `sleep`, `clientAddress`.
public enum DemoDataSet {
    public static let createdAt: Double = 1_704_067_200_000

    public static var configuration: DDPServerConfiguration {
        DDPServerConfiguration(publications: publications, universalPublications: [currentUser], methods: methods)
    }

    /// Adds the users, tasks and typed document to a server's data.
    public static func seed(_ core: ServerCore) async throws {
        let alice = try await core.createUser(username: "alice", email: "alice@example.com", password: "secret")
        let bob = try await core.createUser(username: "bob", email: "bob@example.com", password: "hunter2")
        let tasks: [(String, String, String, String)] = [
            ("task-a1", "alice inbox task", "inbox", alice),
            ("task-a2", "alice work task", "work", alice),
            ("task-b1", "bob inbox task", "inbox", bob)
        ]
        for (id, text, list, owner) in tasks {
            try await core.insert(
                "tasks",
                [
                    "_id": .string(id), "text": .string(text), "listId": .string(list), "owner": .string(owner),
                    "done": false, "createdAt": .date(createdAt)
                ])
        }
        try await core.insert(
            "typed",
            [
                "_id": "typed1", "when": .date(1_704_164_645_678), "blob": .binary([0, 1, 2, 127, 128, 253, 254, 255]),
                "nested": ["a": 1, "b": ["c": [1, 2, ["d": "x"]]], "s": "str", "f": 1.5, "t": true, "z": nil]
            ])
    }

    static var publications: [String: Publication] {
        [
            "tasks": Publication { run in
                if case .object(let filter)? = run.params.first, let list = filter["listId"] {
                    run.publish(Cursor("tasks", selector: try Selector(["listId": list])))
                } else {
                    run.publish(Cursor("tasks"))
                }
            },
            "myTasks": Publication { run in
                if let user = run.userId {
                    run.publish(Cursor("tasks", selector: try Selector(["owner": .string(user)])))
                } else {
                    run.ready()
                }
            },
            "failing": Publication { _ in
                throw DDPError.meteor("not-authorized", "This publication always fails")
            },
            "typed": Publication { run in run.publish(Cursor("typed")) },
            "ticker": ticker,
            "bulk": bulk
        ]
    }

    /// `ticker [rate per second, count, stamp, startAfter]`: `ticks`/`t1` is added as `{n: 0, rate, count}`, then its
    /// `n` changes `count` times at `rate` (count 0: until unsubscribed; at most 1,000,000 per second).
    /// With `stamp` true each change also carries `at`: when it was sent, in microseconds of
    /// `monotonicMicroseconds()` (for latency measured in one process). The changes start
    /// `startAfter` milliseconds (at most a minute) after `ready`, so readers can gather first.
    static let ticker = Publication { run in
        let rate = clamped(run.params.first, default: 10, 0.001...1_000_000)
        let count = max(run.params.dropFirst().first?.intValue ?? 10, 0)
        let stamp = run.params.dropFirst(2).first == .bool(true)
        let startAfter = clamped(run.params.dropFirst(3).first, default: 0, 0...60_000)
        run.added("ticks", "t1", ["n": 0, "rate": .number(rate), "count": .int(count)])
        run.ready()
        run.run { handle in
            if startAfter > 0 { try? await Task.sleep(for: .milliseconds(Int64(startAfter))) }
            let start = ContinuousClock.now
            var n = 0
            while !Task.isCancelled && (count == 0 || n < count) {
                let elapsed = (ContinuousClock.now - start).seconds
                var due = Int(elapsed * rate)
                if count > 0 { due = min(due, count) }
                due = min(due, n + 1_000)
                if due > n {
                    let at: EJSON? = stamp ? .int(DemoDataSet.monotonicMicroseconds()) : nil
                    let batch = (n + 1...due).map { i in
                        var fields: EJSONObject = ["n": .int(i)]
                        if let at { fields["at"] = at }
                        return ServerMessage.changed(collection: "ticks", id: "t1", fields: fields, cleared: [])
                    }
                    await handle.publish(batch)
                    n = due
                } else {
                    let next = Double(n + 1) / rate - elapsed
                    try? await Task.sleep(for: .nanoseconds(Int64(max(0.0005, min(next, 0.05)) * 1e9)))
                }
            }
        }
    }

    /// A number parameter within `range`; `default` when it is missing, not a number or NaN
    /// (`{"$InfNaN": 0}`: compared with anything it is neither smaller nor larger, so clamping
    /// kept it, and the ticker's `Int(elapsed * rate)` trapped — a public reader could stop the demo).
    static func clamped(_ value: EJSON?, default fallback: Double, _ range: ClosedRange<Double>) -> Double {
        guard let n = value?.numberValue, !n.isNaN else { return fallback }
        return min(max(n, range.lowerBound), range.upperBound)
    }

    /// Microseconds on the system's monotonic clock (shared by every thread and process of the machine).
    public static func monotonicMicroseconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int(now.tv_sec) * 1_000_000 + Int(now.tv_nsec) / 1_000
    }

    /// `bulk [n]`: `n` documents (at most 200,000) `b1`…`bn` in `bulk`, with a number, a group and some text.
    static let bulk = Publication { run in
        let count = min(max(run.params.first?.intValue ?? 100, 0), 200_000)
        // Published in chunks from the subscription's task, so a large set does not hold the server for long.
        run.run { handle in
            for start in stride(from: 1, through: max(count, 1), by: 500) where count > 0 {
                if Task.isCancelled { return }
                let chunk = (start...min(start + 499, count)).map { i in
                    ServerMessage.added(
                        collection: "bulk", id: "b\(i)",
                        fields: [
                            "i": .int(i), "group": .string("g\(i % 10)"), "text": .string("document number \(i)"), "done": .bool(i % 2 == 0)
                        ])
                }
                await handle.publish(chunk)
            }
            await handle.ready()
        }
    }

    /// The logged-in user's own document (Meteor's default user publication).
    static let currentUser = Publication { run in
        guard let user = run.userId else { return }
        run.publish(Cursor("users", selector: try Selector(["_id": .string(user)]), fields: ["username", "emails", "profile"]))
    }

    struct Crash: Error {}

    /// The demo's methods as MCP tools (`ddp-bridge demo` offers them at `/mcp`; the same text
    /// is `examples/mcp-tools.json`, the example of `--mcp-tools`).
    public static let mcpTools = """
        {
          "tools": [
            {
              "name": "echo",
              "description": "Answers with what it was given (the demo's echo method)",
              "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
              "params": ["text"]
            },
            {
              "name": "whoami",
              "description": "The Meteor user id this agent acts as (null when signed out)",
              "inputSchema": {"type": "object", "properties": {}}
            }
          ],
          "callMethod": false
        }

        """

    static var methods: [String: MethodHandler] {
        [
            "echo": { _, params in .array(params) },
            "boom": { _, _ in throw DDPError.meteor("bad-thing", "it broke") },
            "crash": { _, _ in throw Crash() },
            "whoami": { invocation, _ in invocation.userId.map(EJSON.string) ?? .null },
            "clientAddress": { invocation, _ in invocation.clientAddress.map(EJSON.string) ?? .null },
            "sleep": { _, params in
                let ms = params.first?.numberValue ?? 0
                // NaN and infinities from the caller must not trap the conversion below.
                guard ms.isFinite else { throw DDPError.meteor(400, "sleep takes a finite number of milliseconds") }
                try await Task.sleep(for: .milliseconds(Int64(min(max(ms, 0), 60_000))))
                return .number(ms)
            }
        ]
    }
}
