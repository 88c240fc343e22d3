import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Follows a ddp-bridge session's live changes and keeps a local copy of the documents.
///
/// Reconnects with Last-Event-ID; on `reset` it drops its copy (a snapshot follows). With a
/// STATE file the copy and the last event id are kept there, and the next run resumes from
/// them. Ctrl-C (or SIGTERM) prints the copy as one JSON line and exits.
///
///     swift run --package-path examples/swift sse-consumer http://127.0.0.1:8080 "$TOKEN" [STATE]
@main
struct SSEConsumer {
    static func main() async throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.count >= 2, let events = URL(string: arguments[0] + "/v1/events?snapshot=true") else {
            FileHandle.standardError.write(Data("usage: sse-consumer BRIDGE TOKEN [STATE]\n".utf8))
            exit(2)
        }
        let state = arguments.count > 2 ? URL(fileURLWithPath: arguments[2]) : nil

        var start = LocalCopy()
        if let state, FileManager.default.fileExists(atPath: state.path) {
            start = try JSONDecoder().decode(LocalCopy.self, from: Data(contentsOf: state))
        }
        let following = Task { [start] in
            var copy = start
            let refused = await follow(events, token: arguments[1], into: &copy, saving: state)
            return (copy, refused)
        }
        // Ctrl-C and SIGTERM cancel the task: its request is cancelled and it returns the copy.
        let signals = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { following.cancel() }
            source.resume()
            return source
        }
        let (copy, refused) = await following.value
        for source in signals { source.cancel() }
        if let refused { say("\(refused)") }
        say(String(decoding: try copy.json(), as: UTF8.self))
        exit(refused == nil ? 0 : 1)
    }

    /// Applies the stream's events to `copy`, reconnecting with its last event id, until the
    /// task is cancelled (nil) or the bridge refuses the stream.
    static func follow(_ url: URL, token: String, into copy: inout LocalCopy, saving state: URL?) async -> Refused? {
        while !Task.isCancelled {
            var request = URLRequest(url: url)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            if let last = copy.lastEventId { request.setValue(last, forHTTPHeaderField: "Last-Event-ID") }
            do {
                for try await event in ServerSentEvents(request: request) {
                    try copy.apply(event)
                    if event.id != nil, let state { try copy.json().write(to: state, options: .atomic) }
                    let id = event.id ?? "-"
                    let name = event.event.padding(toLength: max(10, event.event.count), withPad: " ", startingAt: 0)
                    say("\(String(repeating: " ", count: max(0, 6 - id.count)))\(id) \(name) \(event.data)")
                }
                if Task.isCancelled { return nil }
                say("stream ended; resuming after event \(copy.lastEventId ?? "-")")
            } catch let refused as Refused {
                return refused
            } catch {
                if Task.isCancelled { return nil }
                say("connection lost (\(error.localizedDescription)); resuming after event \(copy.lastEventId ?? "-")")
            }
            try? await Task.sleep(for: .seconds(1))
        }
        return nil
    }

    /// Writes a line to standard output at once (print buffers when it is not a terminal).
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
