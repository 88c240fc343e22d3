/// Why a text is not valid EJSON, and where (a byte offset into the input).
public struct EJSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let offset: Int
    public let reason: String

    public init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "invalid EJSON at byte \(offset): \(reason)" }
}
