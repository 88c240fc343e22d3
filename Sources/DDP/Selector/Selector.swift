/// A MongoDB-style query selector, checked once when built and then matched against
/// documents: equality (including membership in arrays), `$eq`, `$ne`, `$in`, `$nin`,
/// `$gt`/`$gte`/`$lt`/`$lte`, `$exists`, `$not`, `$size`, `$all`, `$elemMatch`,
/// `$and`/`$or`/`$nor`, and dotted paths into nested objects and arrays.
public struct Selector: Sendable, Equatable {
    indirect enum Clause: Sendable, Equatable {
        case and([Clause])
        case or([Clause])
        case nor([Clause])
        case field(path: [String], FieldTest)
    }

    indirect enum FieldTest: Sendable, Equatable {
        case equals(EJSON)
        case notEquals(EJSON)
        case `in`(MemberSet)
        case notIn(MemberSet)
        case compare(op: ComparisonOperator, EJSON)
        case exists(Bool)
        case not(FieldTest)
        case size(Int)
        case all([EJSON])
        case elemMatch(Selector)
        case allOf([FieldTest])
    }

    enum ComparisonOperator: String, Sendable {
        case gt = "$gt"
        case gte = "$gte"
        case lt = "$lt"
        case lte = "$lte"
    }

    let clause: Clause

    /// Matches every document.
    public static let everything = Selector(clause: .and([]))

    /// Builds a selector from its EJSON form; a bare string or ObjectId means `{_id: value}`.
    public init(_ value: EJSON) throws(SelectorError) {
        switch value {
        case .object(let object): clause = try Self.parseDocument(object)
        case .string, .custom(type: "oid", _): clause = .field(path: ["_id"], .equals(value))
        case .null: clause = .and([])
        default: throw SelectorError("a selector must be an object, not \(value.typeName)")
        }
    }

    init(clause: Clause) { self.clause = clause }

    /// When the selector is `{_id: X}` (or a bare id), X.
    public var singleID: EJSON? {
        if case .field(let path, .equals(let value)) = clause, path == ["_id"] { return value }
        if case .and(let clauses) = clause, clauses.count == 1, case .field(let path, .equals(let value)) = clauses[0], path == ["_id"] {
            return value
        }
        return nil
    }

    public func matches(_ document: EJSONObject) -> Bool {
        var work = Work()
        return Self.evaluate(clause, document, &work)
    }

    /// Matches, adding what it cost to `work` (``Selector/Work``); once `work` is stopped the
    /// answer means nothing and matching ends at once.
    public func matches(_ document: EJSONObject, work: inout Work) -> Bool {
        Self.evaluate(clause, document, &work)
    }

    /// Whether any test of the selector reads the document's `_id` (a query that does not need
    /// it can match the cached fields as they are, without building the document with its id).
    public var readsID: Bool { Self.readsID(clause) }

    private static func readsID(_ clause: Clause) -> Bool {
        switch clause {
        case .and(let parts), .or(let parts), .nor(let parts): parts.contains(where: readsID)
        case .field(let path, _): path.first == "_id"
        }
    }

    // MARK: - Parsing

    static func parseDocument(_ object: EJSONObject) throws(SelectorError) -> Clause {
        var clauses: [Clause] = []
        for field in object {
            switch field.key {
            case "$and", "$or", "$nor":
                guard case .array(let elements) = field.value, !elements.isEmpty else {
                    throw SelectorError("\(field.key) needs a non-empty array of selectors")
                }
                var parts: [Clause] = []
                for element in elements {
                    guard case .object(let sub) = element else { throw SelectorError("\(field.key) elements must be objects") }
                    parts.append(try parseDocument(sub))
                }
                clauses.append(field.key == "$and" ? .and(parts) : field.key == "$or" ? .or(parts) : .nor(parts))
            case let key where key.hasPrefix("$"):
                throw SelectorError("unsupported top-level operator \(key)")
            default:
                let path = field.key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                if path.contains(where: \.isEmpty) { throw SelectorError("invalid field path '\(field.key)'") }
                clauses.append(.field(path: path, try parseFieldTest(field.value)))
            }
        }
        return clauses.count == 1 ? clauses[0] : .and(clauses)
    }

    /// A value is an operator object when any of its keys starts with `$`; all of them must then be operators.
    static func parseFieldTest(_ value: EJSON) throws(SelectorError) -> FieldTest {
        guard case .object(let object) = value, object.keys.contains(where: { $0.hasPrefix("$") }) else {
            return .equals(value)
        }
        var tests: [FieldTest] = []
        for field in object {
            let v = field.value
            switch field.key {
            case "$eq": tests.append(.equals(v))
            case "$ne": tests.append(.notEquals(v))
            case "$in", "$nin", "$all":
                guard case .array(let values) = v else { throw SelectorError("\(field.key) needs an array") }
                tests.append(field.key == "$in" ? .in(MemberSet(values)) : field.key == "$nin" ? .notIn(MemberSet(values)) : .all(values))
            case "$gt", "$gte", "$lt", "$lte":
                tests.append(.compare(op: ComparisonOperator(rawValue: field.key)!, v))
            case "$exists":
                switch v {
                case .bool(let b): tests.append(.exists(b))
                case .number(let n): tests.append(.exists(n != 0))
                default: throw SelectorError("$exists needs a boolean")
                }
            case "$not": tests.append(.not(try parseFieldTest(v)))
            case "$size":
                guard let n = v.intValue, n >= 0 else { throw SelectorError("$size needs a non-negative integer") }
                tests.append(.size(n))
            case "$elemMatch":
                guard case .object(let sub) = v else { throw SelectorError("$elemMatch needs an object") }
                tests.append(.elemMatch(Selector(clause: try parseDocument(sub))))
            default:
                if field.key.hasPrefix("$") { throw SelectorError("unsupported operator \(field.key)") }
                throw SelectorError("cannot mix operators and fields in one value")
            }
        }
        return tests.count == 1 ? tests[0] : .allOf(tests)
    }

    // MARK: - Matching

    static func evaluate(_ clause: Clause, _ document: EJSONObject, _ work: inout Work) -> Bool {
        if work.isStopped { return false }
        switch clause {
        case .and(let parts): return parts.allSatisfy { evaluate($0, document, &work) }
        case .or(let parts): return parts.contains { evaluate($0, document, &work) }
        case .nor(let parts): return !parts.contains { evaluate($0, document, &work) }
        case .field(let path, let test):
            work.add(1)
            // Most paths pass through objects only and reach one value (or none): tested as it
            // is, without collecting candidates. A path that meets an array on its way fans out.
            if let reached = directValue(document, path) { return test.matches(one: reached, &work) }
            let values = candidates(.object(document), path[...])
            work.add(values.count)
            return test.matches(values, &work)
        }
    }

    /// The value `path` reaches through objects only (`.some(nil)`: missing); `nil` when an array
    /// comes before its last segment, where every element counts (``candidates(_:_:)``).
    static func directValue(_ document: EJSONObject, _ path: [String]) -> EJSON?? {
        var object = document
        for (i, key) in path.enumerated() {
            guard let next = object[key] else { return .some(nil) }
            if i == path.count - 1 { return .some(next) }
            switch next {
            case .object(let inner): object = inner
            case .array: return nil
            default: return .some(nil)
            }
        }
        return .some(.object(document))
    }

    /// The values a dotted path reaches: a path through an array reaches into each element
    /// (and a numeric segment indexes it). `nil` stands for "missing".
    static func candidates(_ value: EJSON, _ path: ArraySlice<String>) -> [EJSON?] {
        guard let key = path.first else { return [value] }
        let rest = path.dropFirst()
        switch value {
        case .object(let object):
            guard let next = object[key] else { return [nil] }
            return candidates(next, rest)
        case .array(let elements):
            var out: [EJSON?] = []
            if let index = Int(key), index >= 0, index < elements.count {
                out += candidates(elements[index], rest)
            }
            for element in elements {
                if case .object = element { out += candidates(element, path).filter { $0 != nil } }
            }
            return out.isEmpty ? [nil] : out
        default:
            return [nil]
        }
    }
}

extension Selector.FieldTest {
    /// Whether any reached value passes (Mongo's semantics), with `$ne`/`$nin` negated over all.
    func matches(_ values: [EJSON?], _ work: inout Selector.Work) -> Bool {
        switch self {
        case .notEquals(let v): return !Self.equals(v).matches(values, &work)
        case .notIn(let set): return !Self.in(set).matches(values, &work)
        case .not(let inner): return !inner.matches(values, &work)
        case .allOf(let tests): return tests.allSatisfy { $0.matches(values, &work) }
        case .exists(let wanted): return values.contains { $0 != nil } == wanted
        default: return values.contains { matchesOne($0, &work) }
        }
    }

    /// `matches([value])` for the one value a path reached, without building the array.
    func matches(one value: EJSON?, _ work: inout Selector.Work) -> Bool {
        switch self {
        case .notEquals(let v): return !Self.equals(v).matchesOne(value, &work)
        case .notIn(let set): return !Self.in(set).matchesOne(value, &work)
        case .not(let inner): return !inner.matches(one: value, &work)
        case .allOf(let tests): return tests.allSatisfy { $0.matches(one: value, &work) }
        case .exists(let wanted): return (value != nil) == wanted
        default: return matchesOne(value, &work)
        }
    }

    private func matchesOne(_ value: EJSON?, _ work: inout Selector.Work) -> Bool {
        switch self {
        case .equals(let target):
            guard let value else { return target.isNull }
            if value == target { return true }
            if case .array(let elements) = value {
                return elements.contains { element in
                    work.add(1)
                    return work.isStopped || element == target
                }
            }
            return false
        case .in(let targets):
            // Mongo's `$in`: equality with any target, or an array holding one: one hashed
            // lookup per value, whatever the targets' type and number.
            guard let value else { return targets.containsNull }
            if targets.contains(value) { return true }
            if case .array(let elements) = value {
                return elements.contains { element in
                    work.add(1)
                    return work.isStopped || targets.contains(element)
                }
            }
            return false
        case .compare(let op, let target):
            guard let value else { return false }
            if case .array(let elements) = value, !(target.arrayValue != nil) {
                let test = Self.compare(op: op, target)
                return elements.contains { element in
                    work.add(1)
                    return work.isStopped || test.matchesOne(element, &work)
                }
            }
            guard value.typeOrder == target.typeOrder else { return false }
            let c = EJSON.compare(value, target)
            switch op {
            case .gt: return c > 0
            case .gte: return c >= 0
            case .lt: return c < 0
            case .lte: return c <= 0
            }
        case .size(let n):
            if case .array(let elements)? = value { return elements.count == n }
            return false
        case .all(let targets):
            guard case .array(let elements)? = value else { return false }
            // A few targets over a short array: compared one by one; else the elements go into a
            // hashed set once, so the cost is elements + targets, not their product.
            if targets.count * elements.count <= 256 {
                work.add(targets.count * elements.count)
                return targets.allSatisfy { t in elements.contains { $0 == t } }
            }
            work.add(elements.count + targets.count)
            if work.isStopped { return false }
            let present = Set(elements)
            return targets.allSatisfy { present.contains($0) }
        case .elemMatch(let selector):
            guard case .array(let elements)? = value else { return false }
            return elements.contains { element in
                work.add(1)
                if work.isStopped { return true }
                if case .object(let o) = element { return selector.matches(o, work: &work) }
                return false
            }
        case .notEquals, .notIn, .not, .allOf, .exists:
            return matches(one: value, &work)
        }
    }
}

/// A selector (or sort, or projection) that cannot be used, and why.
public struct SelectorError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
