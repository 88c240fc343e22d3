import NIOWebSocket
import Testing

@testable import DDPClient

/// The close handshake of the upstream WebSocket as transcripts, without a socket
/// (``CloseHandshake``): each way it ends, and nothing read, sent or closed twice after.
/// What the shell keeps while it waits is a name here ("timer").
@Suite struct CloseHandshakeTests {
    typealias Handshake = CloseHandshake<String>

    /// Starts the handshake as the owner's close of an active channel does.
    static func closing() -> Handshake {
        var handshake = Handshake()
        #expect(handshake.closeRequested(channelIsActive: true) { "timer" } == .sendCloseAndWait)
        return handshake
    }

    @Test func weCloseFirstThenTheUpstreamAnswers() {
        var handshake = Handshake()
        #expect(handshake.isReading)
        #expect(handshake.closeRequested(channelIsActive: true) { "timer" } == .sendCloseAndWait)
        #expect(handshake.isReading, "the upstream may send until it has read our close")
        #expect(handshake.closeRequested(channelIsActive: true) { "another" } == .join("timer"), "a second close joins the first")
        #expect(handshake.receivedClose() == .close(waiting: "timer", cause: nil), "answered with no second close frame")
        #expect(!handshake.isReading)
        #expect(handshake.deadlinePassed() == .doNothing)
        #expect(handshake.channelClosed() == .doNothing)
        #expect(handshake.closeRequested(channelIsActive: true) { "again" } == .passOn)
    }

    @Test func theUpstreamClosesFirstAndWeAnswer() {
        var handshake = Handshake()
        #expect(handshake.receivedClose() == .sendCloseAndClose(code: .normalClosure, cause: nil))
        #expect(!handshake.isReading)
        #expect(handshake.receivedClose() == .doNothing, "one answer")
        #expect(handshake.closeRequested(channelIsActive: true) { "timer" } == .passOn, "no handshake after the end")
        #expect(handshake.channelClosed() == .doNothing)
    }

    @Test func theUpstreamNeverAnswersAndTheDeadlineEndsIt() {
        var handshake = Self.closing()
        #expect(handshake.deadlinePassed() == .close(waiting: "timer", cause: nil))
        #expect(!handshake.isReading)
        #expect(handshake.receivedClose() == .doNothing, "a late answer")
        #expect(handshake.deadlinePassed() == .doNothing)
        #expect(handshake.channelClosed() == .doNothing)
    }

    @Test func nothingIsReadOnceItHasEndedHoweverItEnded() {
        var ends: [(String, Handshake)] = []
        var handshake = Handshake()
        _ = handshake.receivedClose()
        ends.append(("the upstream's close", handshake))
        handshake = Self.closing()
        _ = handshake.receivedClose()
        ends.append(("the answer to ours", handshake))
        handshake = Self.closing()
        _ = handshake.deadlinePassed()
        ends.append(("the deadline", handshake))
        handshake = Handshake()
        _ = handshake.violated(.invalidText)
        ends.append(("a violation", handshake))
        handshake = Handshake()
        _ = handshake.connectionLost()
        ends.append(("the upstream's FIN", handshake))
        handshake = Handshake()
        _ = handshake.channelClosed()
        ends.append(("the channel's end", handshake))
        for (end, handshake) in ends { #expect(!handshake.isReading, "read after \(end)") }
    }

    @Test func aViolationSendsItsCodeOnceAndIsTheCause() {
        var handshake = Handshake()
        let violation = UpstreamTransportError.protocolViolation("a masked frame")
        #expect(handshake.violated(violation) == .sendCloseAndClose(code: .protocolError, cause: violation))
        #expect(handshake.violated(.invalidText) == .doNothing)
        handshake = Handshake()
        #expect(handshake.violated(.messageTooLarge(limit: 10)) == .sendCloseAndClose(code: .messageTooLarge, cause: .messageTooLarge(limit: 10)))
        // During our close: no second close frame, the violation still the cause.
        handshake = Self.closing()
        #expect(handshake.violated(.invalidText) == .close(waiting: "timer", cause: .invalidText))
    }

    @Test func theUpstreamGoingClosesWithoutACloseFrame() {
        var handshake = Handshake()
        #expect(handshake.connectionLost() == .close(waiting: nil, cause: nil))
        #expect(handshake.connectionLost() == .doNothing)
        handshake = Self.closing()
        #expect(handshake.connectionLost() == .close(waiting: "timer", cause: nil))
    }

    @Test func theChannelGoingEndsItAndCompletesWhatWaited() {
        var handshake = Self.closing()
        #expect(handshake.channelClosed() == .end(waiting: "timer"))
        #expect(handshake.channelClosed() == .doNothing)
        handshake = Handshake()
        #expect(handshake.channelClosed() == .end(waiting: nil))
    }

    /// A channel that is not active has no handshake: its close is its own.
    @Test func aCloseOfAnInactiveChannelIsPassedOn() {
        var handshake = Handshake()
        var made = false
        #expect(
            handshake.closeRequested(channelIsActive: false) {
                made = true
                return "timer"
            } == .passOn)
        #expect(!made, "nothing to wait for was made")
        #expect(handshake.isReading)
        #expect(handshake.channelClosed() == .end(waiting: nil))
    }
}
