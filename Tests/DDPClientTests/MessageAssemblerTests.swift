import NIOCore
import Testing
import WSCore

@testable import DDPClient

/// A message's frames joined and held to the size limit as they arrive (``MessageAssembler``).
extension MessageAssembler {
    mutating func add(tuple frame: (WebSocketDataFrame.Opcode, ByteBuffer, Bool)) throws(UpstreamTransportError) -> ByteBuffer? {
        try add(frame.0, frame.1, fin: frame.2)
    }
}

@Suite struct MessageAssemblerTests {
    func frame(_ opcode: WebSocketDataFrame.Opcode, _ text: String, fin: Bool) -> (WebSocketDataFrame.Opcode, ByteBuffer, Bool) {
        (opcode, ByteBuffer(string: text), fin)
    }

    @Test func aFragmentedMessageIsJoinedAndASingleFrameIsItsOwnMessage() throws {
        var assembler = MessageAssembler(maxSize: 100)
        #expect(try assembler.add(tuple: frame(.text, "{\"msg\":", fin: false)) == nil)
        #expect(try assembler.add(tuple: frame(.continuation, "\"ping\"", fin: false)) == nil)
        let whole = try assembler.add(tuple: frame(.continuation, "}", fin: true))
        #expect(whole.map { String(buffer: $0) } == "{\"msg\":\"ping\"}")
        #expect(try assembler.add(tuple: frame(.binary, "{}", fin: true)).map { String(buffer: $0) } == "{}")
    }

    @Test func aMessageOverTheLimitIsKnownByItsTypeAsItGrows() throws {
        var assembler = MessageAssembler(maxSize: 10)
        #expect(try assembler.add(tuple: frame(.text, "12345", fin: false)) == nil)
        #expect(throws: UpstreamTransportError.messageTooLarge(limit: 10)) { try assembler.add(tuple: frame(.continuation, "678901", fin: false)) }
        // What follows starts afresh.
        #expect(try assembler.add(tuple: frame(.text, "0123456789", fin: true)).map(\.readableBytes) == 10)
    }

    @Test func framesOutOfOrderAreAProtocolViolation() {
        var assembler = MessageAssembler(maxSize: 100)
        #expect(throws: UpstreamTransportError.self) { try assembler.add(tuple: frame(.continuation, "x", fin: true)) }
        var started = MessageAssembler(maxSize: 100)
        _ = try? started.add(tuple: frame(.text, "a", fin: false))
        #expect(throws: UpstreamTransportError.self) { try started.add(tuple: frame(.text, "b", fin: true)) }
    }
}
