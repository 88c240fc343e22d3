import NIOCore
import WSCore

/// Joins the frames of one WebSocket message (a message may come in fragments) and holds it to
/// the size limit as it grows, so an oversized message is known as such by its type, here,
/// rather than by an error of the WebSocket library's own.
struct MessageAssembler {
    let maxSize: Int
    private var pending: ByteBuffer?

    init(maxSize: Int) { self.maxSize = maxSize }

    /// The whole message once its last frame arrives; `nil` while more frames are due.
    mutating func add(_ opcode: WebSocketDataFrame.Opcode, _ data: ByteBuffer, fin: Bool) throws(UpstreamTransportError) -> ByteBuffer? {
        var data = data
        switch opcode {
        case .text, .binary:
            guard pending == nil else { throw .protocolViolation("a new message began before the last one ended") }
            pending = data
        case .continuation:
            guard pending != nil else { throw .protocolViolation("a continuation frame with no message to continue") }
            pending!.writeBuffer(&data)
        }
        guard let message = pending else { return nil }
        guard message.readableBytes <= maxSize else {
            pending = nil
            throw .messageTooLarge(limit: maxSize)
        }
        guard fin else { return nil }
        pending = nil
        return message
    }
}
