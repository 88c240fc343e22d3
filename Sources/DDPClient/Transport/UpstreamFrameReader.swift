import CompressNIO
import HTTPTypes
import NIOCore
import NIOWebSocket
import WSCore

/// The receiving side of a WebSocket client, frame by frame, with no channel: what each frame
/// from the upstream asks for (RFC 6455; RFC 7692 when `permessage-deflate` was agreed).
/// ``UpstreamFrameHandler`` is its shell on the connection's event loop.
///
/// - Data frames are joined into messages by ``MessageAssembler`` and held to the size limit as
///   they grow; a compressed message is inflated when its last frame arrives, to the same limit.
///   A text message must be UTF-8 (§8.1), checked once it is whole (and inflated).
/// - A ping is answered with a pong of the same payload; a pong is dropped.
/// - A close frame is answered with a close frame, and the connection ends.
/// - Anything else (a masked frame, which a server never sends (§5.1), a reserved bit no
///   extension claims, an unknown opcode, frames out of order) is a protocol violation, and the
///   connection ends with it.
struct UpstreamFrameReader {
    enum Outcome: Equatable {
        case none
        /// A whole message (text or binary), inflated if it was compressed.
        case message(ByteBuffer)
        /// Answer with a pong carrying this payload.
        case pong(ByteBuffer)
        /// The upstream closed: answer with a close frame, then close the connection.
        case close
    }

    let maxSize: Int
    private var assembler: MessageAssembler
    private let inflater: Inflater?
    /// The message being received started with RSV1 set: it is compressed.
    private var compressed = false
    /// The message being received is text (it must be UTF-8), not binary.
    private var text = false

    /// - Parameter deflate: what the upstream agreed to in `Sec-WebSocket-Extensions`, or `nil`.
    init(maxSize: Int, deflate: DeflateAgreement?) throws {
        self.maxSize = maxSize
        // A compressed message may be a little longer than its text (RFC 1951's stored blocks).
        self.assembler = MessageAssembler(maxSize: deflate == nil ? maxSize : maxSize + maxSize / 64 + 64)
        self.inflater = try deflate.map { try Inflater($0) }
    }

    mutating func read(_ frame: WebSocketFrame) throws(UpstreamTransportError) -> Outcome {
        // A client must fail the connection on a masked frame from the server (RFC 6455 §5.1).
        if frame.maskKey != nil { throw .protocolViolation("a masked frame (a server's frames are never masked)") }
        if frame.rsv2 || frame.rsv3 { throw .protocolViolation("a frame with a reserved bit set (RSV2 or RSV3)") }
        switch frame.opcode {
        case .ping:
            try requireControl(frame)
            return .pong(frame.unmaskedData)
        case .pong:
            try requireControl(frame)
            return .none
        case .connectionClose:
            try requireControl(frame)
            return .close
        case .text, .binary:
            if frame.rsv1 {
                guard inflater != nil else { throw .protocolViolation("a compressed frame, and no compression was agreed") }
            }
            let message = try assembler.add(frame.opcode == .text ? .text : .binary, frame.unmaskedData, fin: frame.fin)
            compressed = frame.rsv1
            text = frame.opcode == .text
            return try finish(message)
        case .continuation:
            if frame.rsv1 { throw .protocolViolation("RSV1 set on a continuation frame") }
            return try finish(assembler.add(.continuation, frame.unmaskedData, fin: frame.fin))
        default:
            throw .protocolViolation("a frame with the reserved opcode \(frame.opcode)")
        }
    }

    private func requireControl(_ frame: WebSocketFrame) throws(UpstreamTransportError) {
        if frame.rsv1 { throw .protocolViolation("RSV1 set on a control frame") }
        // NIO's decoder rejects fragmented control frames and long ones; this holds either way.
        if !frame.fin || frame.length > 125 { throw .protocolViolation("a fragmented or oversized control frame") }
    }

    private mutating func finish(_ message: ByteBuffer?) throws(UpstreamTransportError) -> Outcome {
        guard var message else { return .none }
        if compressed, let inflater {
            compressed = false
            message = try inflater.inflate(&message, maxSize: maxSize)
        } else {
            // The assembler's limit has room for compressed messages; a plain one is held to the limit itself.
            guard message.readableBytes <= maxSize else { throw .messageTooLarge(limit: maxSize) }
        }
        if text, !message.withUnsafeReadableBytes { UTF8Validation.isValid($0) } { throw .invalidText }
        return .message(message)
    }
}

/// The `permessage-deflate` parameters that matter to a receiver (RFC 7692 §7.1). The bridge
/// sends its own messages uncompressed (they are small, and the RFC lets a sender choose per
/// message), so it keeps an inflater and no deflater.
struct DeflateAgreement: Equatable, Sendable {
    /// `server_no_context_takeover`: each message is compressed on its own.
    var serverNoContextTakeover = false

    static let offer = "permessage-deflate"

    /// What the upstream's `Sec-WebSocket-Extensions` answer agreed to: `nil` when it agreed to
    /// none; an error when it names an extension the bridge did not offer (RFC 6455 §9.1), which
    /// is any extension when `offered` is false (compression off: no inflater at all).
    static func agreed(in answer: HTTPFields, offered: Bool) throws(UpstreamTransportError) -> DeflateAgreement? {
        var agreement: DeflateAgreement?
        for item in WebSocketExtensionHTTPParameters.parseHeaders(answer) {
            guard offered, item.name.lowercased() == "permessage-deflate", agreement == nil else {
                throw .protocolViolation("the upstream agreed to an extension the bridge did not offer: \(item.name)")
            }
            agreement = DeflateAgreement(serverNoContextTakeover: item.parameters["server_no_context_takeover"] != nil)
        }
        return agreement
    }
}

/// Inflates whole messages of one connection (zlib through CompressNIO).
final class Inflater {
    private let decompressor: ZlibDecompressor
    private let resetEachMessage: Bool

    init(_ agreement: DeflateAgreement) throws(UpstreamTransportError) {
        do {
            decompressor = try ZlibDecompressor(algorithm: .deflate, windowSize: 15)
        } catch {
            throw .protocolViolation("could not start an inflater: \(error)")
        }
        resetEachMessage = agreement.serverNoContextTakeover
    }

    func inflate(_ message: inout ByteBuffer, maxSize: Int) throws(UpstreamTransportError) -> ByteBuffer {
        // The sender took off the final empty block's last four bytes (RFC 7692 §7.2.1).
        message.writeBytes([0, 0, 0xFF, 0xFF])
        do {
            let inflated = try message.decompressStream(with: decompressor, maxSize: maxSize)
            // CompressNIO's limit counts the buffers it asked for, whose capacity may be larger.
            guard inflated.readableBytes <= maxSize else { throw CompressNIOError.bufferOverflow }
            // Bytes left over: the sender ended its deflate stream (a final block, which RFC 7692
            // allows); the next message starts a new one.
            if resetEachMessage || message.readableBytes > 0 { try decompressor.reset() }
            return inflated
        } catch let error as CompressNIOError where error == .bufferOverflow {
            throw .messageTooLarge(limit: maxSize)
        } catch {
            throw .protocolViolation("a compressed message that does not inflate: \(error)")
        }
    }
}
