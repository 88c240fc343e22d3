extension Selector {
    public func matches(_ document: EJSONObject) -> Bool {
        var work = Work()
        return Self.evaluate(clause, .object(document), &work)
    }

    /// Matches, adding what it cost to `work` (``Selector/Work``); once `work` is stopped the
    /// answer means nothing and matching ends at once.
    public func matches(_ document: EJSONObject, work: inout Work) -> Bool {
        Self.evaluate(clause, .object(document), &work)
    }

    /// A document matcher on `root` (a document, or an element of an array inside `$elemMatch`).
    static func evaluate(_ clause: Clause, _ root: EJSON, _ work: inout Work) -> Bool {
        if work.isStopped { return false }
        switch clause {
        case .and(let parts): return parts.allSatisfy { evaluate($0, root, &work) }
        case .or(let parts): return parts.contains { evaluate($0, root, &work) }
        case .nor(let parts): return !parts.contains { evaluate($0, root, &work) }
        case .nothing: return false
        case .id(let id):
            work.add(1)
            guard case .object(let document) = root, let own = document["_id"] else { return false }
            return own == id
        case .field(let path, let test):
            let branches = path.branches(in: root)
            work.add(branches.count)
            return test.matches(branches, &work)
        }
    }
}

extension Selector.ValueTest {
    /// Whether the values a path reached pass (`convertElementMatcherToBranchedMatcher`,
    /// `invertBranchedMatcher`, `andBranchedMatchers`).
    func matches(_ branches: FieldPath.Branches, _ work: inout Selector.Work) -> Bool {
        switch self {
        case .element(let test, let expansion):
            switch branches {
            case .one(let value, let dontIterate):
                return Self.any(value, dontIterate: dontIterate, expansion, test, &work)
            case .many(let list):
                return list.contains { Self.any($0.value, dontIterate: $0.dontIterate, expansion, test, &work) }
            }
        case .not(let inner): return !inner.matches(branches, &work)
        case .all(let tests): return tests.allSatisfy { $0.matches(branches, &work) }
        }
    }

    /// `expandArraysInBranches` for one branch: the value (unless it is an array whose elements
    /// alone count) and, for an array not found by an explicit index, each element.
    private static func any(
        _ value: EJSON?, dontIterate: Bool, _ expansion: Selector.Expansion, _ test: Selector.ElementTest, _ work: inout Selector.Work
    ) -> Bool {
        guard expansion != .dontExpandLeafArrays, case .array(let elements)? = value, !dontIterate else {
            return test.matches(value, &work)
        }
        if expansion == .expand, test.matches(value, &work) { return true }
        return elements.contains { element in
            work.add(1)
            return work.isStopped || test.matches(element, &work)
        }
    }
}

extension Selector.ElementTest {
    /// One value (`nil`: missing) against the test.
    func matches(_ value: EJSON?, _ work: inout Selector.Work) -> Bool {
        switch self {
        case .equals(let target):
            guard let value else { return false }
            return EJSON.minimongoEquals(target, value)
        case .isNull:
            return value?.isNull ?? true
        case .in(let set):
            work.add(set.linearCount)
            return set.contains(value)
        case .compare(let op, let operand):
            let value = value ?? .null
            guard value.minimongoType == operand.minimongoType else { return false }
            switch EJSON.minimongoCompare(value, operand) {
            case .less: return op == .lt || op == .lte
            case .greater: return op == .gt || op == .gte
            case .equal: return op == .lte || op == .gte
            case .unordered, .unsupported: return false
            }
        case .never:
            return false
        case .exists:
            return value != nil
        case .size(let n):
            guard case .array(let elements)? = value else { return false }
            return Double(elements.count) == n
        case .type(let code):
            guard let value else { return false }
            return value.minimongoType == code
        case .mod(let divisor, let remainder):
            guard case .number(let n)? = value else { return false }
            return n.truncatingRemainder(dividingBy: divisor) == remainder
        case .elemMatchDocument(let clause):
            guard case .array(let elements)? = value else { return false }
            for element in elements {
                work.add(1)
                if work.isStopped { return false }
                // Minimongo gives up at the first element that is neither an object nor an array.
                guard element.isIndexable else { return false }
                if Selector.evaluate(clause, element, &work) { return true }
            }
            return false
        case .elemMatchValue(let test):
            guard case .array(let elements)? = value else { return false }
            return elements.contains { element in
                work.add(1)
                return !work.isStopped && test.matches(.one(element, dontIterate: true), &work)
            }
        }
    }
}
