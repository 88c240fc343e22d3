/// A call that failed on this side of the wire (the server's own errors are ``DDP/DDPError``).
public struct DDPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Base: Sendable, Equatable {
        case timedOut
        case closed(String)
        case cancelled
    }

    let base: Base

    public static let timedOut = DDPClientError(base: .timedOut)
    public static let cancelled = DDPClientError(base: .cancelled)
    public static func closed(_ reason: String) -> DDPClientError { DDPClientError(base: .closed(reason)) }

    public var isTimeout: Bool { base == .timedOut }

    public var description: String {
        switch base {
        case .timedOut: "the upstream did not answer in time"
        case .closed(let reason): "the upstream connection is closed: \(reason)"
        case .cancelled: "the call was cancelled"
        }
    }
}
