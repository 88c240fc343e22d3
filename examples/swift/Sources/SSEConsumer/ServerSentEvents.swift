import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One server-sent event: its id (only some have one), name and data.
struct ServerSentEvent: Sendable {
    var id: String?
    var event = "message"
    var data = ""
}

/// The bridge answered something other than 200: reconnecting would not help.
struct Refused: Error, CustomStringConvertible {
    let status: Int
    var description: String { "refused: HTTP \(status)" }
}

/// The events of one `text/event-stream` response, as they arrive.
///
/// Linux's URLSession has no `bytes(for:)`, so a data delegate hands the received chunks to
/// the sequence. The request lives as long as the iteration: ending it, or cancelling the
/// task that iterates, cancels the request.
struct ServerSentEvents: AsyncSequence {
    typealias Element = ServerSentEvent
    let request: URLRequest

    func makeAsyncIterator() -> Iterator {
        Iterator(chunks: Self.chunks(of: request).makeAsyncIterator())
    }

    struct Iterator: AsyncIteratorProtocol {
        var chunks: AsyncThrowingStream<Data, any Error>.AsyncIterator
        /// The bytes of a line not ended yet.
        var line: [UInt8] = []
        var event = ServerSentEvent()
        var hasData = false
        var ready: [ServerSentEvent] = []

        mutating func next() async throws -> ServerSentEvent? {
            while ready.isEmpty {
                guard let chunk = try await chunks.next() else { return nil }
                for byte in chunk {
                    if byte == UInt8(ascii: "\n") {
                        received(String(decoding: line.last == UInt8(ascii: "\r") ? line.dropLast() : line[...], as: UTF8.self))
                        line.removeAll(keepingCapacity: true)
                    } else {
                        line.append(byte)
                    }
                }
            }
            return ready.removeFirst()
        }

        /// One line of the stream: a field of the current event, a comment, or the blank line ending it.
        mutating func received(_ line: String) {
            if line.isEmpty {
                if hasData { ready.append(event) }
                (event, hasData) = (ServerSentEvent(), false)
                return
            }
            guard !line.hasPrefix(":") else { return }
            let field = line.prefix { $0 != ":" }
            var value = line.dropFirst(field.count + 1)
            if value.hasPrefix(" ") { value = value.dropFirst() }
            switch field {
            case "id": event.id = String(value)
            case "event": event.event = String(value)
            case "data":
                event.data += hasData ? "\n" + value : value
                hasData = true
            default: break
            }
        }
    }

    /// The body of the response to `request`, chunk by chunk.
    static func chunks(of request: URLRequest) -> AsyncThrowingStream<Data, any Error> {
        AsyncThrowingStream { continuation in
            let session = URLSession(configuration: .default, delegate: Receiver(continuation), delegateQueue: nil)
            let task = session.dataTask(with: request)
            continuation.onTermination = { _ in session.invalidateAndCancel() }
            task.resume()
        }
    }

    /// Passes what the URLSession receives on to the stream.
    final class Receiver: NSObject, URLSessionDataDelegate, Sendable {
        let continuation: AsyncThrowingStream<Data, any Error>.Continuation

        init(_ continuation: AsyncThrowingStream<Data, any Error>.Continuation) {
            self.continuation = continuation
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            if status == 200 {
                completionHandler(.allow)
            } else {
                continuation.finish(throwing: Refused(status: status))
                completionHandler(.cancel)
            }
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            continuation.yield(data)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            continuation.finish(throwing: error)
        }
    }
}
