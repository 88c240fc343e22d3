/// The tests' one poll: checks `condition` every 10 ms until it holds, and throws after
/// `timeout`. Only for state a test can observe from outside alone (over HTTP), where no event
/// says it changed: what a test can watch change waits on a ``ChangeSignal`` (or the owner's own
/// wait: `DDPClient.waitUntil`, `ServerCore.waitUntil`), and time a test can move itself goes
/// through a clock it drives (`BridgeClock`), never through a wait. Each call says why it polls.
public func eventually(
    _ what: String, timeout: Duration = .seconds(10), isolation: isolated (any Actor)? = #isolation, _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw ConditionNotMet(description: "\(what) did not hold within \(timeout)") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

public struct ConditionNotMet: Error, CustomStringConvertible {
    public let description: String

    public init(description: String) { self.description = description }
}
