public import DDP
import HTTPTypes
import HashTreeCollections
public import Timing

/// A query over one collection of the session's cache: a Mongo-style selector, a
/// multi-key sort, skip, limit and a field projection, as `GET /v1/collections/{name}` takes them.
public struct DocumentQuery: Sendable {
    public var selector: Selector = .everything
    /// Sort keys in order; `true` means ascending.
    public var sort: [(path: [String], ascending: Bool)] = []
    public var skip = 0
    public var limit: Int
    public var projection: Projection?

    public init(limit: Int) { self.limit = limit }

    /// Reads the query parameters; an empty one counts as absent.
    public init(selector: String?, sort: String?, skip: String?, limit: String?, fields: String?, defaultLimit: Int, maxLimit: Int)
        throws(BridgeError)
    {
        func given(_ text: String?) -> String? { text.flatMap { $0.isEmpty ? nil : $0 } }
        let selector = given(selector)
        let sort = given(sort)
        let skip = given(skip)
        let limit = given(limit)
        let fields = given(fields)
        self.limit = defaultLimit
        if let selector {
            do { self.selector = try Selector(try Self.json(selector, "selector")) } catch let error as SelectorError {
                throw .badRequest("invalid selector: \(error.reason)")
            } catch { throw BridgeError.from(error) }
        }
        if let sort { self.sort = try Self.parseSort(try Self.json(sort, "sort")) }
        if let skip {
            guard let n = Int(skip), n >= 0 else { throw .badRequest("skip must be a non-negative integer, got '\(skip)'") }
            self.skip = n
        }
        if let limit {
            guard let n = Int(limit), n >= 0 else { throw .badRequest("limit must be a non-negative integer, got '\(limit)'") }
            guard n <= maxLimit else { throw .badRequest("limit must be at most \(maxLimit)") }
            self.limit = n
        }
        if let fields { projection = try Projection(try Self.json(fields, "fields")) }
    }

    static func json(_ text: String, _ name: String) throws(BridgeError) -> EJSON {
        do { return try EJSONParser.parse(text) } catch { throw .badRequest("\(name) is not valid JSON: \(error)") }
    }

    /// `{"field": 1 | -1, ...}` (in key order) or `[["field", "asc" | "desc"], ...]` or `["field", ...]`.
    static func parseSort(_ value: EJSON) throws(BridgeError) -> [(path: [String], ascending: Bool)] {
        func direction(_ v: EJSON) throws(BridgeError) -> Bool {
            switch v {
            case .number(1), .string("asc"), .string("ascending"): return true
            case .number(-1), .string("desc"), .string("descending"): return false
            default: throw .badRequest("a sort direction must be 1, -1, \"asc\" or \"desc\"")
            }
        }
        func path(_ key: String) -> [String] { key.split(separator: ".").map(String.init) }
        switch value {
        case .object(let o):
            var out: [(path: [String], ascending: Bool)] = []
            for field in o { out.append((path(field.key), try direction(field.value))) }
            return out
        case .array(let items):
            var out: [(path: [String], ascending: Bool)] = []
            for item in items {
                switch item {
                case .string(let key): out.append((path(key), true))
                case .array(let pair) where pair.count == 2 && pair[0].stringValue != nil:
                    out.append((path(pair[0].stringValue!), try direction(pair[1])))
                default: throw .badRequest("sort entries must be \"field\" or [\"field\", \"asc\"|\"desc\"]")
                }
            }
            return out
        default:
            throw .badRequest("sort must be an object or an array")
        }
    }

    /// Runs the query: matching documents (with `_id`) after sort, skip and limit, and the total count.
    public func run(on collection: DocumentCache.Collection?) -> (documents: [EJSONObject], count: Int) {
        guard let collection else { return ([], 0) }
        let readsID = selector.readsID
        var matches: [(id: String, document: EJSONObject)] = []
        if let candidates = collection.candidates(for: selector) {
            for id in candidates {
                if let fields = collection.documents[id], let document = match(id, fields, readsID: readsID) { matches.append((id, document)) }
            }
        } else {
            for (id, fields) in collection.documents {
                if let document = match(id, fields, readsID: readsID) { matches.append((id, document)) }
            }
        }
        return page(matches, collection)
    }

    /// The field whose index the query would use, when the collection should build one: the
    /// first condition an index answers (``DDP/Selector/indexableConditions``).
    public var fieldToIndex: String? { selector.indexableConditions.first?.field }

    /// The document with its `_id` when it matches. The id is added first only when the
    /// selector reads it; otherwise only the documents that match are built.
    @inline(__always)
    private func match(_ id: String, _ fields: EJSONObject, readsID: Bool) -> EJSONObject? {
        var work = Selector.Work()
        return match(id, fields, readsID: readsID, work: &work)
    }

    @inline(__always)
    private func match(_ id: String, _ fields: EJSONObject, readsID: Bool, work: inout Selector.Work) -> EJSONObject? {
        if readsID {
            let document = Self.withID(id, fields)
            return selector.matches(document, work: &work) ? document : nil
        }
        return selector.matches(fields, work: &work) ? Self.withID(id, fields) : nil
    }

    /// Runs the query within `budget`, 422 `query-too-expensive` when the work outlasts it. It
    /// runs outside the session's connection actor (on a copy of the collection), and its budget
    /// is read as it works (``QueryBudget``: every few thousand units of work, inside a document
    /// too: one holding a long array is not one unit), so a budget of 2 s means about 2 s however
    /// expensive the documents are one by one; it yields after each slice of work, so a heavy
    /// query holds up neither the session's upstream traffic nor other requests.
    public func run(on collection: DocumentCache.Collection?, budget: QueryBudget) async throws -> (documents: [EJSONObject], count: Int) {
        guard let collection else { return ([], 0) }
        let readsID = selector.readsID
        var work = budget.meter()
        var examined = 0
        var yieldedAt = 0
        var matches: [(id: String, document: EJSONObject)] = []
        // The index's candidates when one answers a condition; else every document.
        let candidates = collection.candidates(for: selector)
        func examine(_ id: String, _ fields: EJSONObject) async throws {
            examined += 1
            if let document = match(id, fields, readsID: readsID, work: &work) { matches.append((id, document)) }
            if work.isStopped { throw budget.refusal(examined: examined, matches: matches.count, work: work.units) }
            if work.units - yieldedAt >= QueryBudget.checkEvery {
                yieldedAt = work.units
                await Task.yield()
                try Task.checkCancellation()
            }
        }
        if let candidates {
            for id in candidates { if let fields = collection.documents[id] { try await examine(id, fields) } }
        } else {
            for (id, fields) in collection.documents { try await examine(id, fields) }
        }
        return page(matches, collection)
    }

    /// Sort (or the collection's own order), skip, limit and projection.
    private func page(_ matches: [(id: String, document: EJSONObject)], _ collection: DocumentCache.Collection) -> (
        documents: [EJSONObject], count: Int
    ) {
        // The positions are sorted, not the matches: moving a match (its id and document) in a
        // sort costs two retains and two releases, and a sort of 100 matches makes hundreds of moves.
        var ranked = Array(matches.indices)
        if let order = collection.order, sort.isEmpty {
            // The first place of an id, should the order ever hold one twice.
            let rank = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            let ranks = matches.map { rank[$0.id] ?? .max }
            ranked.sort { ranks[$0] < ranks[$1] }
        } else {
            let keys = sort
            matches.withUnsafeBufferPointer { matches in
                ranked.sort { i, j in
                    for key in keys {
                        let c = EJSON.compare(Self.value(matches[i].document, key.path), Self.value(matches[j].document, key.path))
                        if c != 0 { return key.ascending ? c < 0 : c > 0 }
                    }
                    return matches[i].id < matches[j].id
                }
            }
        }
        let page = ranked.dropFirst(skip).prefix(limit).map { projection?.apply(matches[$0].document) ?? matches[$0].document }
        return (Array(page), matches.count)
    }

    /// A cached document with its `_id` first, decoded from the wire id.
    public static func withID(_ id: String, _ fields: EJSONObject) -> EJSONObject {
        let idValue = (try? DocumentID(wire: id).ejson) ?? .string(id)
        var fieldsList = [EJSONObject.Field(key: "_id", value: idValue)]
        fieldsList.reserveCapacity(fields.count + 1)
        for field in fields where field.key != "_id" { fieldsList.append(field) }
        return EJSONObject(uniqueFieldsInOrder: fieldsList)
    }

    static func value(_ document: EJSONObject, _ path: [String]) -> EJSON {
        var current = EJSON.object(document)
        for key in path {
            guard let next = current[key] else { return .null }
            current = next
        }
        return current
    }
}

/// `{"a": 1, "b.c": 1}` keeps those fields (and `_id` unless `"_id": 0`); `{"a": 0}` drops them.
public struct Projection: Sendable {
    let paths: [[String]]
    let include: Bool
    let keepID: Bool

    init(_ value: EJSON) throws(BridgeError) {
        guard case .object(let o) = value else { throw .badRequest("fields must be an object like {\"name\": 1}") }
        var include: Bool?
        var keepID = true
        var paths: [[String]] = []
        for field in o {
            let flag: Bool
            switch field.value {
            case .number(1), .bool(true): flag = true
            case .number(0), .bool(false): flag = false
            default: throw .badRequest("fields values must be 1, 0, true or false")
            }
            if field.key == "_id" {
                keepID = flag
                continue
            }
            if let include, include != flag { throw .badRequest("fields cannot mix inclusion and exclusion") }
            include = flag
            paths.append(field.key.split(separator: ".").map(String.init))
        }
        self.paths = paths
        self.include = include ?? false
        self.keepID = keepID
    }

    func apply(_ document: EJSONObject) -> EJSONObject {
        var out: EJSONObject
        if include {
            out = EJSONObject()
            if keepID, let id = document["_id"] { out["_id"] = id }
            for path in paths { Self.copy(path[...], from: .object(document), into: &out) }
        } else {
            out = document
            if !keepID { out.removeValue(forKey: "_id") }
            for path in paths { Self.remove(path[...], from: &out) }
        }
        return out
    }

    private static func copy(_ path: ArraySlice<String>, from source: EJSON, into target: inout EJSONObject) {
        guard let key = path.first, let value = source[key] else { return }
        if path.count == 1 {
            target[key] = value
            return
        }
        var child = target[key]?.objectValue ?? EJSONObject()
        copy(path.dropFirst(), from: value, into: &child)
        if !child.isEmpty { target[key] = .object(child) }
    }

    private static func remove(_ path: ArraySlice<String>, from target: inout EJSONObject) {
        guard let key = path.first else { return }
        if path.count == 1 {
            target.removeValue(forKey: key)
            return
        }
        guard case .object(var child)? = target[key] else { return }
        remove(path.dropFirst(), from: &child)
        target[key] = .object(child)
    }
}

/// How long a collection query may work before it is refused. The clock is read every
/// ``checkEvery`` units of work (``Selector/Work``: values tested, array elements and operator
/// targets gone through), inside a document too, not every so many documents: well under a
/// millisecond of matching between two looks, whatever one document costs.
public struct QueryBudget: Sendable {
    let deadline: ContinuousClock.Instant?
    let limit: Duration
    let clock: BridgeClock

    /// Units of work between two looks at the clock (and two chances to yield).
    static let checkEvery = 4096

    public init(time: Duration, clock: BridgeClock) {
        deadline = clock.now + time
        limit = time
        self.clock = clock
    }

    private init() {
        deadline = nil
        limit = .zero
        clock = .system
    }

    public static let unlimited = QueryBudget()

    /// The meter one query's matching runs under: it stops once the deadline has passed.
    func meter() -> Selector.Work {
        guard let deadline else { return Selector.Work() }
        let clock = self.clock
        return Selector.Work(every: Self.checkEvery) { clock.now > deadline }
    }

    /// 422 `query-too-expensive`, with what was done.
    func refusal(examined: Int, matches: Int, work: Int) -> BridgeError {
        BridgeError(
            .queryTooExpensive,
            "The query examined \(examined) documents (\(work) units of work) without finishing within \(limit) (the --query-time-budget); narrow the selector",
            details: ["examined": .int(examined), "matched": .int(matches), "work": .int(work)])
    }
}
