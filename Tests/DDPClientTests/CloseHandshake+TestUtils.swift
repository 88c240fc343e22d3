@testable import DDPClient

// Test-only: the handshake's actions compared in transcripts.

extension CloseHandshake.EndAction: Equatable where Waiting: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.sendCloseAndClose(let code, let cause), .sendCloseAndClose(let otherCode, let otherCause)):
            code == otherCode && cause == otherCause
        case (.close(let waiting, let cause), .close(let otherWaiting, let otherCause)):
            waiting == otherWaiting && cause == otherCause
        case (.doNothing, .doNothing): true
        default: false
        }
    }
}

extension CloseHandshake.CloseRequestAction: Equatable where Waiting: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.sendCloseAndWait, .sendCloseAndWait), (.passOn, .passOn): true
        case (.join(let waiting), .join(let other)): waiting == other
        default: false
        }
    }
}

extension CloseHandshake.ChannelClosedAction: Equatable where Waiting: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.end(let waiting), .end(let other)): waiting == other
        case (.doNothing, .doNothing): true
        default: false
        }
    }
}
