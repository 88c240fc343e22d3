import Bridge
import DDP
import Foundation
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

@Suite struct MinimongoVectorTests {
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
            let ids = try Self.query(query.parameters, dropping: "fields").run(on: collection).documents.map { $0["_id"] ?? .null }
            let documents = try Self.query(query.parameters).run(on: collection).documents.map(EJSON.object)
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
        for query in vectors.queries where query.error == nil {
            guard let engine = try? Self.query(query.parameters, dropping: "fields"), let expected = try? engine.run(on: plain) else { continue }
            if let field = engine.fieldToIndex {
                let indexed = cache.indexed("c", fields: [field], at: .now)
                if (try? engine.run(on: indexed))?.documents != expected.documents { differences.append("#\(query.index) with an index of \(field)") }
            }
            guard let everything = try? Self.query(["selector": query.parameters["selector"] ?? "{}"]).run(on: plain) else { continue }
            let live = Set(vectors.documents.filter { engine.selector.matches($0) }.compactMap { $0["_id"] })
            if engine.selector.idLookup == nil, live != Set(everything.documents.compactMap { $0["_id"] }) {
                differences.append("#\(query.index) live query")
            }
        }
        #expect(differences.isEmpty, "\(differences.prefix(20).joined(separator: "\n"))")
    }
}
