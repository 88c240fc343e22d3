/// A MongoDB-style query selector, compiled once and then matched against documents exactly as
/// Meteor's Minimongo matches them (`minimongo/common.js`, `matcher.js`): equality (an array
/// matches by any element, objects with their key order), `$eq`, `$ne`, `$gt`, `$gte`, `$lt`,
/// `$lte` (within one type), `$in`, `$nin`, `$all`, `$exists`, `$size`, `$type`, `$mod`, `$not`,
/// `$elemMatch`, and `$and`, `$or`, `$nor`, `$comment`; dotted paths into objects, into arrays by
/// index and across arrays of objects. Regular expressions, `$where`, geospatial and bitwise
/// operators are refused.
public struct Selector: Sendable, Equatable {
    /// Minimongo's document matchers.
    indirect enum Clause: Sendable, Equatable {
        /// Every part matches (none: everything).
        case and([Clause])
        case or([Clause])
        case nor([Clause])
        case field(FieldPath, ValueTest)
        /// A bare id as the selector: the document's `_id` equals it.
        case id(EJSON)
        case nothing
    }

    /// Minimongo's branched matchers: a test of every value a path reaches.
    indirect enum ValueTest: Sendable, Equatable {
        /// One of the values (after `Expansion`) passes the test.
        case element(ElementTest, Expansion)
        case not(ValueTest)
        /// Every test passes, each on any value (none: everything).
        case all([ValueTest])
    }

    /// Whether an array reached is tested as itself, by its elements, or both.
    enum Expansion: Sendable, Equatable {
        /// The array itself and each of its elements.
        case expand
        /// The array itself only (`$size`, `$elemMatch`).
        case dontExpandLeafArrays
        /// Its elements only (`$type`).
        case dontIncludeLeafArrays
    }

    /// Minimongo's element matchers: a test of one value (`nil`: missing).
    indirect enum ElementTest: Sendable, Equatable {
        case equals(EJSON)
        case isNull
        case `in`(MemberSet)
        case compare(ComparisonOperator, EJSON)
        case never
        case exists
        case size(Double)
        case type(Int)
        case mod(divisor: Double, remainder: Double)
        case elemMatchDocument(Clause)
        case elemMatchValue(ValueTest)
    }

    enum ComparisonOperator: String, Sendable {
        case gt = "$gt"
        case gte = "$gte"
        case lt = "$lt"
        case lte = "$lte"
    }

    let clause: Clause

    /// When the selector is an id (`"abc"`) or `{_id: id}` alone: Minimongo then answers from its
    /// map by id, without matching, sorting or limiting (and with nothing past a skip).
    public let idLookup: EJSON?

    /// Matches every document.
    public static let everything = Selector(clause: .and([]))

    init(clause: Clause) {
        self.clause = clause
        idLookup = nil
    }

    /// Compiles a selector from its EJSON form, as Minimongo's `Matcher` does: a string, number or
    /// ObjectId means `{_id: value}`; `null` and `false`, and an `_id` condition whose value is
    /// falsy, match nothing.
    public init(_ value: EJSON) throws(SelectorError) {
        try Self.refuseRegularExpressions(value)
        switch value {
        case .string, .number, .custom(type: "oid", _):
            clause = .id(value)
            idLookup = value
        case .null, .bool(false):
            clause = .nothing
            idLookup = nil
        case .object(let object):
            if let id = object["_id"], !id.isTruthy {
                clause = .nothing
            } else {
                clause = try Self.compileDocument(object)
            }
            if object.count == 1, let id = object["_id"], Self.isID(id) { idLookup = id } else { idLookup = nil }
        case .date:
            // Minimongo compiles a Date as a document with no conditions.
            clause = .and([])
            idLookup = nil
        default:
            throw SelectorError("a selector must be an object or an id, not \(value.typeName)")
        }
    }

    /// Minimongo's `_selectorIsId`: a string, a number or an ObjectId.
    static func isID(_ value: EJSON) -> Bool {
        switch value {
        case .string, .number, .custom(type: "oid", _): true
        default: false
        }
    }

    /// When the selector is `{_id: X}` (or a bare id), X.
    public var singleID: EJSON? {
        if let idLookup { return idLookup }
        if case .field(let path, .element(.equals(let value), _)) = clause, path.parts == ["_id"] { return value }
        return nil
    }

    /// Whether any test of the selector reads the document's `_id` (a query that does not need
    /// it can match the cached fields as they are, without building the document with its id).
    public var readsID: Bool { Self.readsID(clause) }

    private static func readsID(_ clause: Clause) -> Bool {
        switch clause {
        case .and(let parts), .or(let parts), .nor(let parts): parts.contains(where: readsID)
        case .field(let path, _): path.parts.first == "_id"
        case .id: true
        case .nothing: false
        }
    }

    // MARK: - Compiling

    static let logicalOperators: Set<String> = ["$and", "$or", "$nor", "$where", "$comment"]

    static func refuseRegularExpressions(_ value: EJSON) throws(SelectorError) {
        switch value {
        case .regexp: throw SelectorError("regular expressions ($regex, {\"$regexp\": …}) are not supported")
        case .array(let items): for item in items { try refuseRegularExpressions(item) }
        case .object(let object):
            for field in object {
                if field.key == "$regex" || field.key == "$options" {
                    throw SelectorError("regular expressions ($regex, {\"$regexp\": …}) are not supported")
                }
                try refuseRegularExpressions(field.value)
            }
        case .custom(_, let inner): try refuseRegularExpressions(inner)
        default: break
        }
    }

    /// `compileDocumentSelector`: a condition per key, all of which must hold.
    static func compileDocument(_ object: EJSONObject) throws(SelectorError) -> Clause {
        var clauses: [Clause] = []
        for field in object {
            let key = field.key
            if key.hasPrefix("$") {
                switch key {
                case "$and": clauses.append(.and(try compileList(field.value, key)))
                case "$or":
                    let parts = try compileList(field.value, key)
                    clauses.append(parts.count == 1 ? parts[0] : .or(parts))
                case "$nor": clauses.append(.nor(try compileList(field.value, key)))
                case "$comment": continue
                case "$where": throw SelectorError("$where is not supported")
                default: throw SelectorError("unknown top-level operator \(key)")
                }
            } else {
                clauses.append(.field(FieldPath(key), try compileValue(field.value)))
            }
        }
        return clauses.count == 1 ? clauses[0] : .and(clauses)
    }

    private static func compileList(_ value: EJSON, _ name: String) throws(SelectorError) -> [Clause] {
        guard case .array(let elements) = value, !elements.isEmpty else { throw SelectorError("\(name) needs a non-empty array of selectors") }
        var parts: [Clause] = []
        for element in elements {
            guard case .object(let sub) = element else { throw SelectorError("\(name) elements must be objects") }
            parts.append(try compileDocument(sub))
        }
        return parts
    }

    /// `compileValueSelector`: an operator object, or a value to equal.
    static func compileValue(_ value: EJSON) throws(SelectorError) -> ValueTest {
        if case .object(let object) = value, try isOperatorObject(object) { return try compileOperators(object) }
        return .element(try equality(value), .expand)
    }

    /// Whether every key of a non-empty object is an operator (starts with `$`, or is `diff`, as
    /// Minimongo has it); a mix is an error unless `inconsistentOK`, when it is no operator object.
    static func isOperatorObject(_ object: EJSONObject, inconsistentOK: Bool = false) throws(SelectorError) -> Bool {
        var operators: Bool?
        for key in object.keys {
            let isOperator = key.hasPrefix("$") || key == "diff"
            if operators == nil {
                operators = isOperator
            } else if operators != isOperator {
                if !inconsistentOK { throw SelectorError("cannot mix operators and fields in one value: \(EJSON.object(object))") }
                return false
            }
        }
        return operators ?? false
    }

    private static func equality(_ value: EJSON) throws(SelectorError) -> ElementTest {
        if case .object(let object) = value, try isOperatorObject(object) {
            throw SelectorError("an operator object cannot be a value to compare with: \(value)")
        }
        return value.isNull ? .isNull : .equals(value)
    }

    /// `operatorBranchedMatcher`: every operator on its own, each on any value the path reaches.
    private static func compileOperators(_ object: EJSONObject) throws(SelectorError) -> ValueTest {
        var tests: [ValueTest] = []
        for field in object {
            let operand = field.value
            switch field.key {
            case "$eq": tests.append(.element(try equality(operand), .expand))
            case "$ne": tests.append(.not(.element(try equality(operand), .expand)))
            case "$not": tests.append(.not(try compileValue(operand)))
            case "$in": tests.append(.element(.in(try memberSet(operand, "$in")), .expand))
            case "$nin": tests.append(.not(.element(.in(try memberSet(operand, "$nin")), .expand)))
            case "$exists": tests.append(operand.isTruthy ? .element(.exists, .expand) : .not(.element(.exists, .expand)))
            case "$all":
                guard case .array(let criteria) = operand else { throw SelectorError("$all needs an array") }
                if criteria.isEmpty {
                    tests.append(.element(.never, .dontExpandLeafArrays))
                    continue
                }
                var all: [ValueTest] = []
                for criterion in criteria {
                    if case .object(let o) = criterion, try isOperatorObject(o) { throw SelectorError("$all takes values, not operators") }
                    all.append(try compileValue(criterion))
                }
                tests.append(all.count == 1 ? all[0] : .all(all))
            case "$gt", "$gte", "$lt", "$lte":
                guard let op = ComparisonOperator(rawValue: field.key) else { continue }
                // An array operand is never greater or smaller than anything (Minimongo, SERVER-11444).
                if case .array = operand {
                    tests.append(.element(.never, .expand))
                } else {
                    tests.append(.element(.compare(op, operand), .expand))
                }
            case "$mod":
                guard case .array(let pair) = operand, pair.count == 2, case .number(let divisor) = pair[0], case .number(let remainder) = pair[1]
                else { throw SelectorError("$mod needs an array of two numbers, [divisor, remainder]") }
                tests.append(.element(.mod(divisor: divisor, remainder: remainder), .expand))
            case "$size":
                switch operand {
                case .number(let n): tests.append(.element(.size(n), .dontExpandLeafArrays))
                // A string counts as 0, as in Minimongo (and MongoDB).
                case .string: tests.append(.element(.size(0), .dontExpandLeafArrays))
                default: throw SelectorError("$size needs a number")
                }
            case "$type": tests.append(.element(.type(try typeCode(operand)), .dontIncludeLeafArrays))
            case "$elemMatch":
                guard case .object(let sub) = operand else { throw SelectorError("$elemMatch needs an object") }
                let valueKeys = EJSONObject(uniqueFieldsInOrder: sub.fields.filter { !logicalOperators.contains($0.key) })
                if try isOperatorObject(valueKeys, inconsistentOK: true) {
                    tests.append(.element(.elemMatchValue(try compileValue(operand)), .dontExpandLeafArrays))
                } else {
                    tests.append(.element(.elemMatchDocument(try compileDocument(sub)), .dontExpandLeafArrays))
                }
            case "$regex", "$options", "$where", "$near", "$nearSphere", "$maxDistance", "$geoWithin", "$geoIntersects",
                "$bitsAllSet", "$bitsAnySet", "$bitsAllClear", "$bitsAnyClear", "$text", "$expr", "$jsonSchema":
                throw SelectorError("unsupported operator \(field.key)")
            default:
                throw SelectorError("unknown operator \(field.key)")
            }
        }
        return tests.count == 1 ? tests[0] : .all(tests)
    }

    private static func memberSet(_ operand: EJSON, _ name: String) throws(SelectorError) -> MemberSet {
        guard case .array(let values) = operand else { throw SelectorError("\(name) needs an array") }
        for value in values {
            if case .object(let o) = value, try isOperatorObject(o) { throw SelectorError("\(name) takes values, not operators") }
        }
        return MemberSet(values)
    }

    /// `$type`'s operand: a number Minimongo accepts, or one of MongoDB's type names.
    private static func typeCode(_ operand: EJSON) throws(SelectorError) -> Int {
        switch operand {
        case .string(let name):
            guard let code = typeAliases[name] else { throw SelectorError("unknown $type name '\(name)'") }
            return code
        case .number(let n):
            guard n.isFinite, n.rounded() == n, n == -1 || (1...19).contains(n) || n == 127, let code = Int(exactly: n) else {
                throw SelectorError("invalid $type code \(n)")
            }
            return code
        default:
            throw SelectorError("$type needs a number or a type name")
        }
    }

    static let typeAliases: [String: Int] = [
        "double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "undefined": 6, "objectId": 7, "bool": 8,
        "date": 9, "null": 10, "regex": 11, "dbPointer": 12, "javascript": 13, "symbol": 14, "javascriptWithScope": 15,
        "int": 16, "timestamp": 17, "long": 18, "decimal": 19, "minKey": -1, "maxKey": 127
    ]
}

/// A selector (or sort, or projection) that cannot be used, and why.
public struct SelectorError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
