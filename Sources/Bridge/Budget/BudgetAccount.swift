/// Whom a session's memory is charged to in the ``MemoryBudget``. A user's session: its address,
/// for good. A public pool connection: the address that placed the subscription loading on it
/// (``PublicFanout``), with an anonymous share, for what the connection took on while that
/// address was its placer, until its subscriptions are released; nobody (the total only) else.
/// So an address cannot hold the budget through the public readers it makes.
final class BudgetAccount: Sendable {
    private struct Pool {
        var placer: ClientKey?
        /// What each address is charged with for this connection.
        var held: [ClientKey: Int] = [:]
    }

    private let fixed: ClientKey?
    private let pool: LockedState<Pool>?

    private init(fixed: ClientKey?, pool: LockedState<Pool>?) {
        self.fixed = fixed
        self.pool = pool
    }

    /// A user's session, charged to `address` (`nil`: the total only).
    static func address(_ address: ClientKey?) -> BudgetAccount { BudgetAccount(fixed: address, pool: nil) }

    /// A public pool connection.
    static func publicPool() -> BudgetAccount { BudgetAccount(fixed: nil, pool: LockedState(Pool())) }

    /// Charges `delta` bytes; public pool charges use the anonymous share.
    func charge(_ budget: MemoryBudget, _ delta: Int, anonymous: Bool) -> MemoryBudget.Standing {
        guard let pool else { return budget.charge(fixed, delta, anonymous: anonymous) }
        let address = pool.withLock { pool -> ClientKey? in
            guard let placer = pool.placer else { return nil }
            pool.held[placer, default: 0] += delta
            return placer
        }
        return budget.charge(address, delta, anonymous: true)
    }

    /// No address is charged with anything of this connection (what it holds counts in the
    /// total only): a new subscription placed here is charged for what it loads alone.
    var isUnclaimed: Bool { pool?.withLock { $0.placer == nil && $0.held.isEmpty } ?? true }

    /// A new subscription from `address` loads on this connection: what it takes on is charged
    /// to that address from now on.
    func place(_ address: ClientKey) { pool?.withLock { $0.placer = address } }

    /// `address` holds no subscription here any more: its charge goes to the total only.
    func release(_ address: ClientKey, from budget: MemoryBudget) {
        guard
            let held = pool?.withLock({ pool -> Int? in
                if pool.placer == address { pool.placer = nil }
                return pool.held.removeValue(forKey: address)
            })
        else { return }
        budget.charge(address, -held, anonymous: true)
        budget.charge(nil, held, anonymous: true)
    }

    /// The session closed: its whole charge (`total`) goes back, each address's part to it.
    func giveBack(_ total: Int, to budget: MemoryBudget, anonymous: Bool) {
        guard let pool else {
            budget.charge(fixed, -total, anonymous: anonymous)
            return
        }
        let held = pool.withLock { pool in
            defer { pool = Pool() }
            return pool.held
        }
        var rest = total
        for (address, bytes) in held {
            budget.charge(address, -bytes, anonymous: true)
            rest -= bytes
        }
        budget.charge(nil, -rest, anonymous: true)
    }
}
