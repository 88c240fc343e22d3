public import DDP
public import NIOCore

/// The Server-Sent Events wire format.
public enum SSEFrame {
    public static func encode(id: UInt64?, event: String, data: EJSON) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96)
        if let id {
            EJSONWriter.appendLiteral("id: ", to: &out)
            EJSONWriter.writeInteger(Int64(id), into: &out)
            out.append(0x0A)
        }
        EJSONWriter.appendLiteral("event: ", to: &out)
        out.append(contentsOf: event.utf8)
        EJSONWriter.appendLiteral("\ndata: ", to: &out)
        // Compact JSON has no raw newlines (they are escaped in strings), so one data line suffices.
        EJSONWriter.write(data, into: &out)
        EJSONWriter.appendLiteral("\n\n", to: &out)
        return out
    }

    /// A comment line: heartbeats that keep proxies from closing idle streams.
    public static let heartbeat: [UInt8] = Array(": ping\n\n".utf8)
    /// ``heartbeat`` in the one buffer every stream writes.
    static let heartbeatBuffer = ByteBuffer(bytes: heartbeat)

    /// A stream's last event: `error` with a code and a reason, no id (the server ends the
    /// stream after it).
    static func lastError(_ code: BridgeError.Code, _ reason: String) -> [UInt8] {
        encode(id: nil, event: "error", data: ["error": .string(code.description), "reason": .string(reason)])
    }

    /// An event frame's parts as ``encode(id:event:data:)`` wrote them: its event name and its
    /// data's text (`nil` for anything else).
    static func parts(of frame: ByteBuffer) -> (event: String, data: String)? {
        var event: String?
        var data: String?
        // One field a line; the data is compact JSON, whose strings escape their newlines.
        for line in String(buffer: frame).split(separator: "\n") {
            if line.hasPrefix("event: ") { event = String(line.dropFirst(7)) } else if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
        }
        guard let event, let data else { return nil }
        return (event, data)
    }

    /// The reconnection delay hint, sent first.
    public static func retry(milliseconds: Int) -> [UInt8] { Array("retry: \(milliseconds)\n\n".utf8) }
}
