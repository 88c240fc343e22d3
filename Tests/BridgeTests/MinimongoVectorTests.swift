import Bridge
import DDP
import DDPServer
import Foundation
import HTTPTypes
import Logging
import Testing

/// The differential vectors (Fixtures/minimongo-vectors.json, scripts/query-vectors): documents
/// and queries drawn from a seed, each with the answer Meteor's Minimongo gave for
/// `find(selector, {sort, skip, limit, fields}).fetch()` over those documents inserted in order.
/// Every query must answer the same through the bridge's query engine: the same documents in the
/// same order, the same projected documents, an error where Minimongo threw.
struct MinimongoVectors: Sendable {
    struct Query: Sendable {
        let index: Int
        let parameters: [String: String]
        let ids: [EJSON]?
        let documents: [EJSON]?
        let error: String?
        let text: String
    }

    let documents: [EJSONObject]
    let queries: [Query]

    static func load() throws -> MinimongoVectors {
        let url = Bundle.module.url(forResource: "Fixtures", withExtension: nil)!.appendingPathComponent("minimongo-vectors.json")
        let file = try EJSONParser.parse(String(contentsOf: url, encoding: .utf8))
        let documents = (file["documents"]?.arrayValue ?? []).compactMap(\.objectValue)
        var queries: [Query] = []
        for (index, entry) in (file["queries"]?.arrayValue ?? []).enumerated() {
            var parameters: [String: String] = [:]
            for name in ["selector", "sort", "skip", "limit", "fields"] {
                guard let value = entry[name] else { continue }
                parameters[name] = value.numberValue.flatMap { Int(exactly: $0) }.map(String.init) ?? value.description
            }
            let expect = entry["expect"]
            queries.append(
                Query(
                    index: index, parameters: parameters, ids: expect?["ids"]?.arrayValue, documents: expect?["documents"]?.arrayValue,
                    error: expect?["error"]?.stringValue, text: entry.description))
        }
        return MinimongoVectors(documents: documents, queries: queries)
    }

    /// The documents as a session's cache holds them after their `added` messages, in order.
    func cache(collection: String) throws -> DocumentCache {
        var cache = DocumentCache()
        for document in documents {
            guard let id = document["_id"] else { continue }
            var fields = document
            fields.removeValue(forKey: "_id")
            _ = cache.apply(.added(collection: collection, id: try DocumentID(ejson: id).wire, fields: fields))
        }
        return cache
    }
}

/// Heavy (12,000 queries, tens of seconds of CPU in a debug build): run on its own by the test
/// command (`DDP_BRIDGE_HEAVY_TESTS=1`), so it does not starve the timing of the tests beside it.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["DDP_BRIDGE_HEAVY_TESTS"] != nil))
struct MinimongoVectorTests {
    static let limit = 100_000

    static func query(_ parameters: [String: String], dropping name: String? = nil) throws(BridgeError) -> DocumentQuery {
        var parameters = parameters
        if let name { parameters[name] = nil }
        return try DocumentQuery(
            selector: parameters["selector"], sort: parameters["sort"], skip: parameters["skip"], limit: parameters["limit"],
            fields: parameters["fields"], defaultLimit: limit, maxLimit: limit)
    }

    /// What the engine answers: the ids in order (from the query without its projection) and the
    /// projected documents, or the error.
    static func answer(_ query: MinimongoVectors.Query, on collection: DocumentCache.Collection?) -> (ids: [EJSON], documents: [EJSON])? {
        do {
            let documents = try Self.query(query.parameters).run(on: collection).documents.map(EJSON.object)
            // Without a projection the documents carry their ids; with one, the ids come from the query without it.
            guard query.parameters["fields"] != nil else { return (documents.map { $0["_id"] ?? .null }, documents) }
            let ids = try Self.query(query.parameters, dropping: "fields").run(on: collection).documents.map { $0["_id"] ?? .null }
            return (ids, documents)
        } catch {
            return nil
        }
    }

    @Test func everyQueryAnswersWhatMinimongoAnswered() throws {
        let vectors = try MinimongoVectors.load()
        #expect(vectors.documents.count >= 300)
        #expect(vectors.queries.count >= 5_000)
        let collection = try vectors.cache(collection: "c").collections["c"]
        var differences: [String] = []
        for query in vectors.queries {
            let answer = Self.answer(query, on: collection)
            if let error = query.error {
                if let answer { differences.append("#\(query.index) \(query.text)\n  Minimongo threw \(error); the bridge answered \(answer.ids)") }
                continue
            }
            guard let answer else {
                let reason = (try? Self.query(query.parameters)).map { _ in "running it" } ?? "reading it"
                differences.append("#\(query.index) \(query.text)\n  the bridge refused it (\(reason)); Minimongo answered \(query.ids ?? [])")
                continue
            }
            if answer.ids != query.ids ?? [] {
                differences.append("#\(query.index) \(query.text)\n  ids \(answer.ids)")
            } else if let expected = query.documents, answer.documents != expected {
                differences.append("#\(query.index) \(query.text)\n  documents \(answer.documents)")
            }
        }
        #expect(differences.isEmpty, "\(differences.count) of \(vectors.queries.count) differ:\n\(differences.prefix(15).joined(separator: "\n"))")
    }

    /// The field index narrows a query without changing its answer, and a live query (a stream's
    /// `selector=`: the selector on each document with its id) holds what the query matches.
    @Test func theIndexAndTheLiveQueryAgreeWithTheQuery() throws {
        let vectors = try MinimongoVectors.load()
        var cache = try vectors.cache(collection: "c")
        let plain = cache.collections["c"]
        var differences: [String] = []
        var checkedSelectors: Set<String> = []
        for query in vectors.queries where query.error == nil {
            guard let engine = try? Self.query(query.parameters, dropping: "fields"), let expected = try? engine.run(on: plain) else { continue }
            if let field = engine.fieldToIndex {
                let indexed = cache.indexed("c", fields: [field], at: .now)
                if (try? engine.run(on: indexed))?.documents != expected.documents { differences.append("#\(query.index) with an index of \(field)") }
            }
            let selector = query.parameters["selector"] ?? "{}"
            guard engine.selector.idLookup == nil, checkedSelectors.insert(selector).inserted,
                let everything = try? Self.query(["selector": selector]).run(on: plain)
            else { continue }
            let live = Set(vectors.documents.filter { engine.selector.matches($0) }.compactMap { $0["_id"] })
            if live != Set(everything.documents.compactMap { $0["_id"] }) { differences.append("#\(query.index) live query") }
        }
        #expect(differences.isEmpty, "\(differences.prefix(20).joined(separator: "\n"))")
    }
}

/// The vectors' documents published in order by the in-process DDP server, a session subscribed
/// to them, its queries as `GET /v1/collections/vectors` over real HTTP. Seconds of CPU: run on
/// its own with the heavy tests (`DDP_BRIDGE_HEAVY_TESTS=1`).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["DDP_BRIDGE_HEAVY_TESTS"] != nil))
struct MinimongoVectorHTTPTests {
    typealias Get = @Sendable ([String: String]) async throws -> BridgeHarness.Reply

    static func withVectors(_ body: @Sendable (MinimongoVectors, Get) async throws -> Void) async throws {
        let vectors = try MinimongoVectors.load()
        let upstream = LocalDDPServer(
            configuration: DDPServerConfiguration(publications: ["vectors": Publication { run in run.publish(Cursor("vectors")) }]),
            logger: Logger(label: "upstream"))
        for document in vectors.documents { _ = try await upstream.core.insert("vectors", document) }
        try await upstream.start()
        do {
            try await BridgeHarness.run(upstreamURL: await upstream.url) { h in
                let (token, _) = try await h.session()
                let subscribed = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"vectors"}"#)
                #expect(subscribed.status == .created, "\(subscribed.text)")
                try await body(vectors) { parameters in
                    let query = parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\(urlEncoded($0.value))" }.joined(separator: "&")
                    return try await h.request(.get, "/v1/collections/vectors?\(query)", token: token)
                }
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    @Test func aSampleOfTheVectorsAnswersTheSameThroughHTTP() async throws {
        try await Self.withVectors { vectors, get in
            var differences: [String] = []
            var sampled = 0
            for query in vectors.queries where query.index % 20 == 0 {
                sampled += 1
                let full = try await get(query.parameters)
                if query.error != nil {
                    if full.status != .badRequest { differences.append("#\(query.index): \(full.status), not 400") }
                    continue
                }
                var withoutFields = query.parameters
                withoutFields["fields"] = nil
                let ids = try await get(withoutFields)["documents"]?.arrayValue?.map { $0["_id"] ?? .null }
                if full.status != .ok || ids != query.ids {
                    differences.append("#\(query.index) \(query.text)\n  \(full.status): ids \(ids ?? [])")
                } else if let expected = query.documents, full["documents"]?.arrayValue != expected {
                    differences.append("#\(query.index) \(query.text)\n  documents \(full["documents"] ?? .null)")
                }
            }
            #expect(sampled >= 250)
            #expect(differences.isEmpty, "\(differences.count) of \(sampled) differ:\n\(differences.prefix(10).joined(separator: "\n"))")
        }
    }

    /// Each way the bridge once answered otherwise than Minimongo, with Minimongo's answer (the
    /// vectors' first documents were written for them).
    @Test func theQueriesThatOnceDifferedAnswerAsMinimongoDoes() async throws {
        let cases: [(selector: String, extra: [String: String], ids: [String], documents: String?)] = [
            // A sort key reaching into arrays of objects: an empty array has no key, so it comes first.
            (#"{"_id":{"$in":["d001","d002"]}}"#, ["sort": #"{"items.k":1}"#], ["d002", "d001"], nil),
            // Missing before null.
            (#"{"_id":{"$in":["d018","d019","d006"]}}"#, ["sort": #"{"n":1}"#], ["d019", "d018", "d006"], nil),
            // Strings by UTF-16 code units: "Apple" < "A\u030a" < "apple" < "Å" < "😀" < "\uffff".
            (
                #"{"_id":{"$in":["d010","d011","d012","d013","d016","d017"]}}"#, ["sort": #"{"s":1}"#],
                ["d016", "d010", "d017", "d011", "d013", "d012"], nil
            ),
            // Code units, not canonical equivalence: "Å" does not equal "A\u030a".
            ("{\"s\":\"\u{00C5}\"}", [:], ["d011"], nil),
            // An array element without the field counts as null.
            (#"{"items.q":{"$nin":[null]},"_id":"d003"}"#, [:], [], nil),
            // Each range operator may hold on another element.
            (#"{"mixed":{"$gte":5,"$lte":-1}}"#, [:], ["d004"], nil),
            // A numeric index does not look inside a nested array.
            (#"{"tags.0":"red"}"#, [:], [], nil),
            // $all against a plain value; $all: [] matches nothing.
            (#"{"n":{"$all":[0.5]}}"#, [:], ["d006"], nil),
            (#"{"n":{"$all":[]}}"#, [:], [], nil),
            // $elemMatch with operators on values.
            (#"{"b":{"$elemMatch":{"$gt":2}}}"#, [:], ["d009"], nil),
            // limit=0 is no limit.
            (#"{"_id":{"$in":["d001","d002","d003"]}}"#, ["limit": "0"], ["d001", "d002", "d003"], nil),
            // Projections: _id alone; dotted inclusions keep the parents; dotted exclusions inside arrays.
            (#"{"_id":"d001"}"#, ["fields": #"{"_id":1}"#], ["d001"], #"[{"_id":"d001"}]"#),
            (#"{"_id":"d001"}"#, ["fields": #"{"items.k":1}"#], ["d001"], #"[{"_id":"d001","items":[{"k":"b"},{"k":"c"}]}]"#),
            (#"{"_id":"d007"}"#, ["fields": #"{"meta.y.z":1}"#], ["d007"], #"[{"_id":"d007","meta":{"y":{}}}]"#),
            (#"{"_id":"d008"}"#, ["fields": #"{"meta.x":0}"#], ["d008"], #"[{"_id":"d008","meta":[{},{}]}]"#)
        ]
        // Among the documents written for them (the random ones after them match some of these too).
        let written = (1...20).map { String(format: "\"d%03d\"", $0) }.joined(separator: ",")
        try await Self.withVectors { _, get in
            for item in cases {
                var parameters = item.extra
                parameters["selector"] = item.documents == nil ? #"{"$and":[\#(item.selector),{"_id":{"$in":[\#(written)]}}]}"# : item.selector
                let reply = try await get(parameters)
                #expect(reply.status == .ok, "\(item.selector): \(reply.text)")
                let documents = reply["documents"]?.arrayValue ?? []
                if let expected = item.documents {
                    #expect(EJSON.array(documents) == (try EJSONParser.parse(expected)), "\(item.selector) \(item.extra)")
                } else {
                    #expect(documents.map { $0["_id"] ?? .null } == item.ids.map(EJSON.string), "\(item.selector) \(item.extra)")
                }
            }
        }
    }
}
