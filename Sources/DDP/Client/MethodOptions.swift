/// Options of one method call.
public struct MethodOptions: Sendable, Equatable {
    /// Sent as `randomSeed` so ids the method generates are predictable (Meteor inserts).
    public var randomSeed: String?
    /// Meteor's `wait`: the call runs alone; later calls wait until it has completed.
    public var wait: Bool
    /// Meteor's `noRetry`: never re-sent after a reconnect; fails instead if its result was lost.
    public var atMostOnce: Bool

    public init(randomSeed: String? = nil, wait: Bool = false, atMostOnce: Bool = false) {
        self.randomSeed = randomSeed
        self.wait = wait
        self.atMostOnce = atMostOnce
    }

    public static let `default` = MethodOptions()
}
