import NIOWebSocket

/// The upstream WebSocket's close handshake (RFC 6455 §5.5.1, §7.1) as a value, with no
/// channel: where the WebSocket is, and what each event asks its shell
/// (``UpstreamFrameHandler``) to do.
///
/// - We close first: our close frame goes out and the WebSocket waits for the upstream's, until
///   a deadline; the upstream's answer, the deadline, a violation or the upstream going end it.
/// - The upstream closes first: its close frame is answered with ours and the channel closed.
/// - A violation: a close frame with its code, the channel closed, and the violation is the cause.
/// - The upstream going (its FIN, a socket error): the channel closed, with no close frame.
///
/// Once it has ended nothing more is read, no close frame goes out, and a close asked for is
/// the channel's own. `Waiting` is what the shell keeps while it waits for the upstream's close
/// frame (the close's promise and the deadline's timer); tests use any value.
struct CloseHandshake<Waiting> {
    enum State {
        /// No close frame has gone out; frames are read.
        case open
        /// Our close frame went out; the upstream's is awaited until the deadline. Frames are
        /// still read meanwhile (the upstream may send until it has read our close).
        case waiting(Waiting)
        /// The WebSocket has ended (the channel is closed or closing): frames are dropped.
        case ended
    }

    private(set) var state: State = .open

    /// What ends the WebSocket: the shell closes the channel and completes its end with `cause`.
    enum EndAction {
        /// Send a close frame with `code` first (this side has not sent one).
        case sendCloseAndClose(code: WebSocketErrorCode, cause: UpstreamTransportError?)
        /// No close frame (ours went out already, or the upstream is gone); `waiting`, when a
        /// close waited for the upstream's answer: its promise completes with the channel's
        /// close, its deadline is over.
        case close(waiting: Waiting?, cause: UpstreamTransportError?)
        /// It has ended already.
        case doNothing
    }

    /// What a close of the whole channel asked of the handler does.
    enum CloseRequestAction {
        /// Send a close frame (1000) and wait for the upstream's (the `Waiting` was made).
        case sendCloseAndWait
        /// A handshake is running: the close asked for completes with it.
        case join(Waiting)
        /// The channel's own close (it is not open, or the WebSocket has ended).
        case passOn
    }

    /// What the channel going away (inactive, or the handler removed with it) does.
    enum ChannelClosedAction {
        /// The WebSocket ends with it, without a cause; what waited (if anything did) is done.
        case end(waiting: Waiting?)
        /// It has ended already.
        case doNothing
    }

    /// Whether a frame that arrives is read: not once the WebSocket has ended.
    var isReading: Bool {
        if case .ended = state { return false }
        return true
    }

    /// The upstream's close frame arrived: answered, unless ours went first.
    mutating func receivedClose() -> EndAction {
        end(sending: .normalClosure, cause: nil)
    }

    /// A frame broke the protocol (or one was over the size limit): a close frame with its code.
    mutating func violated(_ violation: UpstreamTransportError) -> EndAction {
        end(sending: violation.closeCode, cause: violation)
    }

    /// The upstream went without a close frame (its FIN, or a socket error).
    mutating func connectionLost() -> EndAction {
        switch state {
        case .open:
            state = .ended
            return .close(waiting: nil, cause: nil)
        case .waiting(let waiting):
            state = .ended
            return .close(waiting: waiting, cause: nil)
        case .ended:
            return .doNothing
        }
    }

    /// The deadline for the upstream's close frame passed.
    mutating func deadlinePassed() -> EndAction {
        guard case .waiting(let waiting) = state else { return .doNothing }
        state = .ended
        return .close(waiting: waiting, cause: nil)
    }

    /// The owner closes the whole channel: the handshake starts when the WebSocket is open on an
    /// active channel (`startWaiting` makes what the shell keeps meanwhile; it must not touch
    /// the channel's pipeline: the shell sends the close frame once this has returned).
    mutating func closeRequested(channelIsActive: Bool, startWaiting: () -> Waiting) -> CloseRequestAction {
        switch state {
        case .open where channelIsActive:
            state = .waiting(startWaiting())
            return .sendCloseAndWait
        case .waiting(let waiting):
            return .join(waiting)
        case .open, .ended:
            return .passOn
        }
    }

    /// The channel went (inactive, or the handler was removed with it).
    mutating func channelClosed() -> ChannelClosedAction {
        switch state {
        case .open:
            state = .ended
            return .end(waiting: nil)
        case .waiting(let waiting):
            state = .ended
            return .end(waiting: waiting)
        case .ended:
            return .doNothing
        }
    }

    private mutating func end(sending code: WebSocketErrorCode, cause: UpstreamTransportError?) -> EndAction {
        switch state {
        case .open:
            state = .ended
            return .sendCloseAndClose(code: code, cause: cause)
        case .waiting(let waiting):
            // Ours went out already: no second close frame.
            state = .ended
            return .close(waiting: waiting, cause: cause)
        case .ended:
            return .doNothing
        }
    }
}
