extension Selector {
    /// What matching has cost so far, and whether its owner's budget for it is spent. One unit
    /// is a value tested, an element of an array gone through or an operator's target compared
    /// one by one, so a document holding a 100,000-element array costs what it costs, not one.
    /// Every `every` units the owner's `isSpent` is asked (the selector reads no clock itself);
    /// once it says yes, or past `ceiling`, matching stops at the next element and its answer no
    /// longer means anything: the owner checks ``isStopped`` and refuses the work.
    public struct Work {
        public private(set) var units = 0
        public private(set) var isStopped = false
        private let ceiling: Int
        private let every: Int
        private var nextLook: Int
        private let isSpent: (() -> Bool)?

        public init(ceiling: Int = .max, every: Int = 4096, isSpent: (() -> Bool)? = nil) {
            self.ceiling = ceiling
            self.every = max(every, 1)
            self.nextLook = max(every, 1)
            self.isSpent = isSpent
        }

        /// Counts `n` units (an owner counts what it does around matching too, a document visited).
        @inline(__always)
        public mutating func add(_ n: Int) {
            units &+= n
            if units >= nextLook { look() }
        }

        private mutating func look() {
            nextLook = units &+ every
            if units > ceiling || isSpent?() == true { isStopped = true }
        }
    }
}
