import DDP
import Foundation
import HTTPTypes

/// The process's memory budget for what it holds for clients: the documents of every session's
/// cache and of the public pool, by their estimate (``DDP/DocumentCache/estimatedBytes``). A
/// session's own cap (`--session-max-documents`) does not bound the process: an anonymous
/// session on a 100,000-document publication takes ~48 MiB, and one address may open 100 of them.
///
/// - **Admission**: a subscription that would be new is refused before it is sent upstream when
///   the budget is spent (503 `memory-budget-exhausted`) or its address's share is (429
///   `memory-share-exhausted`). An anonymous session's address gets the smaller share.
/// - **While loading**: each change to a session's cache is charged; one that takes the total or
///   the address past its bound stops the session's subscriptions still loading, with the same
///   error (the server then removes their documents, and the charge goes down again).
///
/// A public pool connection is charged to the address that placed the subscription loading on
/// it, with an anonymous share (``BudgetAccount``).
final class MemoryBudget: Sendable {
    enum Standing: Equatable {
        case within
        case overShare
        case overTotal
    }

    private struct State {
        var used = 0
        var byAddress: [ClientKey: Int] = [:]
    }

    /// Bytes in all.
    let limit: Int
    /// The most one address may hold: logged-in sessions, anonymous ones.
    let addressShare: Int
    let anonymousShare: Int
    private let state = LockedState(State())

    init(limit: Int, addressShare: Int, anonymousShare: Int) {
        self.limit = max(0, limit)
        self.addressShare = max(0, addressShare)
        self.anonymousShare = max(0, min(anonymousShare, addressShare))
    }

    /// The part of the configuration the budget is made from.
    struct Settings: Sendable, Equatable {
        /// Bytes in all (`--memory-budget`); `nil`: half of the cgroup's memory limit, or of the
        /// machine's memory.
        var limit: Int?
        /// Percent of the limit one address may hold, and one whose sessions are anonymous.
        var addressPercent: Double
        var anonymousPercent: Double
    }

    convenience init(_ settings: Settings) {
        let limit = settings.limit ?? Self.defaultLimit(memory: Self.memoryLimit())
        self.init(
            limit: limit, addressShare: Self.share(limit, percent: settings.addressPercent),
            anonymousShare: Self.share(limit, percent: settings.anonymousPercent))
    }

    static func share(_ limit: Int, percent: Double) -> Int {
        let bytes = (Double(limit) * min(max(percent, 0), 100) / 100).rounded(.down)
        guard bytes.isFinite, let share = Int(exactly: min(bytes, Double(Int.max / 2))) else { return 0 }
        return share
    }

    var used: Int { state.withLock { $0.used } }

    func used(by address: ClientKey) -> Int { state.withLock { $0.byAddress[address, default: 0] } }

    /// May `address` make a new subscription now? Throws the refusal when it may not. `nil`: the
    /// public pool, which stands for no address (the total only).
    func admit(_ address: ClientKey?, anonymous: Bool) throws(BridgeError) {
        let standing = state.withLock { state -> Standing in
            if state.used >= limit { return .overTotal }
            if let address, state.byAddress[address, default: 0] >= (anonymous ? anonymousShare : addressShare) { return .overShare }
            return .within
        }
        if let refusal = refusal(standing, anonymous: anonymous) { throw refusal }
    }

    /// Adds `delta` bytes (negative: freed) to what `address` holds; says whether the total or the
    /// address is now past its bound.
    @discardableResult
    func charge(_ address: ClientKey?, _ delta: Int, anonymous: Bool) -> Standing {
        state.withLock { state in
            state.used += delta
            var mine = 0
            if let address {
                mine = state.byAddress[address, default: 0] + delta
                state.byAddress[address] = mine > 0 ? mine : nil
            }
            if state.used > limit { return .overTotal }
            if address != nil, mine > (anonymous ? anonymousShare : addressShare) { return .overShare }
            return .within
        }
    }

    /// The refusal for a standing past a bound (`nil` within).
    func refusal(_ standing: Standing, anonymous: Bool) -> BridgeError? { cause(standing, anonymous: anonymous).map(BridgeError.from) }

    /// Why a subscription is refused, or stopped while it loads, for this standing (`nil`: within).
    func cause(_ standing: Standing, anonymous: Bool) -> DDPClientError? {
        switch standing {
        case .within: return nil
        case .overTotal:
            return DDPClientError(
                .memoryBudgetExhausted,
                "The bridge holds its memory budget for documents (\(limit) bytes); try again when others have let go")
        case .overShare:
            let share = anonymous ? anonymousShare : addressShare
            return DDPClientError(
                .memoryShareExhausted,
                "This address holds its share of the bridge's memory budget (\(share) bytes\(anonymous ? " for anonymous sessions" : "")); let go of subscriptions or log in"
            )
        }
    }

    // MARK: - The machine's memory

    /// Half of the memory this process may use (the documents' estimate runs below what they
    /// cost in all: event logs, encodings, the connections themselves take the rest).
    static func defaultLimit(memory: Int) -> Int { memory / 2 }

    /// The cgroup's memory limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) when there is one,
    /// else the machine's physical memory.
    static func memoryLimit() -> Int {
        let physical = Int(clamping: ProcessInfo.processInfo.physicalMemory)
        for path in ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            if let bytes = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), bytes > 0, bytes < physical { return bytes }
        }
        return physical
    }
}
