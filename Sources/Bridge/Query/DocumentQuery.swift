public import DDP
import HTTPTypes
import HashTreeCollections
public import Timing

/// A query over one collection of the session's cache: a Mongo-style selector, a multi-key sort,
/// skip, limit and a field projection, as `GET /v1/collections/{name}` takes them. It answers what
/// Meteor's Minimongo answers for `find(selector, {sort, skip, limit, fields}).fetch()` over the
/// same documents (docs/API.md, "Query semantics").
public struct DocumentQuery: Sendable {
    public var selector: Selector = .everything
    public var sort: SortSpec?
    public var skip = 0
    /// How many documents at most (the bridge's bound on an answer: a `limit` of 0 asks for
    /// no limit, which is ``maxLimit``).
    public var limit: Int
    public var projection: Projection?

    public init(limit: Int) { self.limit = limit }

    /// Reads the query parameters; an empty one counts as absent. As in Minimongo, a sort is not
    /// read when the selector names one document by its id (the answer is that document).
    public init(selector: String?, sort: String?, skip: String?, limit: String?, fields: String?, defaultLimit: Int, maxLimit: Int)
        throws(BridgeError)
    {
        func given(_ text: String?) -> String? { text.flatMap { $0.isEmpty ? nil : $0 } }
        self.limit = defaultLimit
        if let selector = given(selector) { self.selector = try Self.parse(selector, "selector", Selector.init) }
        if self.selector.idLookup == nil, let sort = given(sort) {
            let value = try Self.json(sort, "sort")
            // A falsy sort (null, false, 0) is no sort, as Minimongo takes it.
            if value.isTruthy { self.sort = try Self.parse(value, "sort", SortSpec.init) }
        }
        if let skip = given(skip) {
            guard let n = Int(skip), n >= 0 else { throw .badRequest("skip must be a non-negative integer, got '\(skip)'") }
            self.skip = n
        }
        if let limit = given(limit) {
            guard let n = Int(limit), n >= 0 else { throw .badRequest("limit must be a non-negative integer, got '\(limit)'") }
            guard n <= maxLimit else { throw .badRequest("limit must be at most \(maxLimit) (0 asks for no limit: up to \(maxLimit))") }
            self.limit = n == 0 ? maxLimit : n
        }
        if let fields = given(fields) {
            let value = try Self.json(fields, "fields")
            // Falsy fields (null, false, 0) select the whole document, as in Minimongo.
            if value.isTruthy, !(value.isDateOrRegexp) { projection = try Self.parse(value, "fields", Projection.init) }
        }
    }

    private static func parse<T>(_ text: String, _ name: String, _ make: (EJSON) throws(SelectorError) -> T) throws(BridgeError) -> T {
        try parse(try json(text, name), name, make)
    }

    private static func parse<T>(_ value: EJSON, _ name: String, _ make: (EJSON) throws(SelectorError) -> T) throws(BridgeError) -> T {
        do { return try make(value) } catch { throw .badRequest("invalid \(name): \(error.reason)") }
    }

    static func json(_ text: String, _ name: String) throws(BridgeError) -> EJSON {
        do { return try EJSONParser.parse(text) } catch { throw .badRequest("\(name) is not valid JSON: \(error)") }
    }

    /// Runs the query: matching documents (with `_id`) after sort, skip and limit, and the total count.
    public func run(on collection: DocumentCache.Collection?) throws(BridgeError) -> (documents: [EJSONObject], count: Int) {
        guard let collection else { return ([], 0) }
        if let found = try lookUpByID(collection) { return found }
        let readsID = selector.readsID
        var matches: [(id: String, document: EJSONObject)] = []
        var work = Selector.Work()
        if let candidates = collection.candidates(for: selector) {
            for id in candidates {
                if let fields = collection.documents[id], let document = match(id, fields, readsID: readsID, work: &work) {
                    matches.append((id, document))
                }
            }
        } else {
            for (id, fields) in collection.documents {
                if let document = match(id, fields, readsID: readsID, work: &work) { matches.append((id, document)) }
            }
        }
        return try page(matches, collection)
    }

    /// The field whose index the query would use, when the collection should build one: the
    /// first condition an index answers (``DDP/Selector/indexableConditions``).
    public var fieldToIndex: String? { selector.idLookup == nil ? selector.indexableConditions.first?.field : nil }

    /// Minimongo's answer to a selector that names one id: that document if it is held (a skip
    /// leaves nothing), without sorting or limiting.
    private func lookUpByID(_ collection: DocumentCache.Collection) throws(BridgeError) -> (documents: [EJSONObject], count: Int)? {
        guard let id = selector.idLookup else { return nil }
        guard let wire = try? DocumentID(ejson: id).wire, let fields = collection.documents[wire] else { return ([], 0) }
        guard skip == 0 else { return ([], 1) }
        return (try project([Self.withID(wire, fields)]), 1)
    }

    /// The page's documents through the projection (which Minimongo applies to them alone).
    private func project(_ documents: [EJSONObject]) throws(BridgeError) -> [EJSONObject] {
        guard let projection else { return documents }
        do {
            var out: [EJSONObject] = []
            out.reserveCapacity(documents.count)
            for document in documents { out.append(try projection.apply(document)) }
            return out
        } catch {
            throw .badRequest("invalid fields: \(error.reason)")
        }
    }

    /// The document with its `_id` when it matches. The id is added first only when the
    /// selector reads it; otherwise only the documents that match are built.
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
        if let found = try lookUpByID(collection) { return found }
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
        return try page(matches, collection)
    }

    /// Sort (or the collection's own order: an ordered collection's, else the order the documents
    /// arrived in), skip, limit and projection.
    private func page(_ matches: [(id: String, document: EJSONObject)], _ collection: DocumentCache.Collection) throws(BridgeError) -> (
        documents: [EJSONObject], count: Int
    ) {
        // The positions are sorted, not the matches: moving a match (its id and document) in a
        // sort costs two retains and two releases, and a sort of 100 matches makes hundreds of moves.
        var ranked = Array(matches.indices)
        let arrivals = matches.map { collection.arrivals[$0.id] ?? .max }
        if let sort, !sort.isEmpty, matches.count > 1 {
            // Each match's key once; ties (and keys that compare as NaN) keep the arrival order.
            var keys: [[EJSON?]] = []
            keys.reserveCapacity(matches.count)
            do {
                for match in matches { keys.append(try sort.key(of: .object(match.document))) }
                try ranked.sort { i, j in
                    switch try sort.compare(keys[i], keys[j]) {
                    case .less: return true
                    case .greater: return false
                    case .equal, .unordered, .unsupported: return arrivals[i] < arrivals[j]
                    }
                }
            } catch let error as SelectorError {
                throw .badRequest("invalid sort: \(error.reason)")
            } catch {
                throw BridgeError.from(error)
            }
        } else if let order = collection.order, sort == nil {
            // The first place of an id, should the order ever hold one twice.
            let rank = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            let ranks = matches.map { rank[$0.id] ?? .max }
            ranked.sort { ranks[$0] < ranks[$1] }
        } else {
            ranked.sort { arrivals[$0] < arrivals[$1] }
        }
        return (try project(ranked.dropFirst(skip).prefix(limit).map { matches[$0].document }), matches.count)
    }

    /// A cached document with its `_id` first, decoded from the wire id.
    public static func withID(_ id: String, _ fields: EJSONObject) -> EJSONObject {
        let idValue = (try? DocumentID(wire: id).ejson) ?? .string(id)
        var fieldsList = [EJSONObject.Field(key: "_id", value: idValue)]
        fieldsList.reserveCapacity(fields.count + 1)
        for field in fields where field.key != "_id" { fieldsList.append(field) }
        return EJSONObject(uniqueFieldsInOrder: fieldsList)
    }
}

extension EJSON {
    /// A date or a regular expression: JavaScript objects without own keys.
    fileprivate var isDateOrRegexp: Bool {
        switch self {
        case .date, .regexp: true
        default: false
        }
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
