import DDP
import HTTPTypes
import Hummingbird

/// What an event stream request asks for, read once from its query string and `Last-Event-ID`:
/// the parameters decoded in one pass over the query, in proportion to its length. Nothing
/// data-sized is done here: the selector and the params are JSON parsed by ``filter()`` and
/// ``subscription()``, which a door calls only once the credential or the publication is known.
///
/// Query: `collections` (comma-separated), `id` (one document; one collection), `selector` (a
/// live query; one collection), `snapshot=true`, `subscribe` + `params` (a subscription the
/// stream holds while it is open), `lastEventId` (or the `Last-Event-ID` header), `token`.
struct StreamQuery: Sendable {
    private let parameters: [String: String]
    private let lastEventIDHeader: String?

    static let lastEventIDField = HTTPField.Name("Last-Event-ID") ?? .accept

    /// `nil` when a parameter's name or value does not decode (the request path answers it 400).
    init?(query: Substring?, headers: HTTPFields) {
        guard let parameters = QueryString.parameters(query ?? "") else { return nil }
        self.parameters = parameters
        lastEventIDHeader = headers[Self.lastEventIDField]
    }

    /// A routed request's stream query (its query was checked by ``RequestHygieneMiddleware``).
    init(_ request: Request) throws(BridgeError) {
        guard let query = StreamQuery(query: request.uri.query.map { $0[...] }, headers: request.headers) else {
            throw .badRequest("the query string has a parameter that does not decode as UTF-8")
        }
        self = query
    }

    /// The session token given as `?token=`.
    var token: String? { parameters["token"].flatMap { $0.isEmpty ? nil : $0 } }

    /// `subscribe=`'s publication, if any (`params` is read by ``subscription()``).
    var subscribe: String? { parameters["subscribe"].flatMap { $0.isEmpty ? nil : $0 } }

    /// Whether `subscribe` or `params` is given.
    var asksForSubscription: Bool { parameters["subscribe"] != nil || parameters["params"] != nil }

    /// `subscribe=<publication>&params=<JSON array>`, if given.
    func subscription() throws(BridgeError) -> (name: String, params: [EJSON])? {
        guard let name = subscribe else {
            if parameters["params"] != nil { throw .badRequest("params needs subscribe=publication") }
            return nil
        }
        var params: [EJSON] = []
        if let text = parameters["params"], !text.isEmpty {
            guard case .array(let list) = try DocumentQuery.json(text, "params") else { throw .badRequest("params must be a JSON array") }
            params = list
        }
        return (name, params)
    }

    /// The stream's filter: collections, one document, a live query (its selector compiled).
    func filter() throws(BridgeError) -> StreamFilter {
        var filter = StreamFilter()
        if let text = parameters["collections"], !text.isEmpty {
            filter.collections = Set(text.split(separator: ",").map { String(RequestInput.trimmed($0)) }.filter { !$0.isEmpty })
        }
        let single = filter.collections?.count == 1
        if let id = parameters["id"], !id.isEmpty {
            guard single else { throw .badRequest("id needs exactly one collection in collections=") }
            do { filter.documentID = try DocumentID(wire: id).wire } catch { throw .badRequest("invalid id: \(error.reason)") }
        }
        if let text = parameters["selector"], !text.isEmpty {
            guard single else { throw .badRequest("selector needs exactly one collection in collections=") }
            do { filter.selector = try Selector(try DocumentQuery.json(text, "selector")) } catch let error as SelectorError {
                throw .badRequest("invalid selector: \(error.reason)")
            } catch { throw BridgeError.from(error) }
        }
        return filter
    }

    /// Where the stream starts: after a `Last-Event-ID`, with a snapshot, or live.
    func start() throws(BridgeError) -> Session.StreamStart {
        if let text = lastEventIDHeader ?? parameters["lastEventId"], !text.isEmpty {
            guard let id = QueryString.eventID(text) else {
                throw .badRequest("Last-Event-ID must be an event id from this session, got '\(text)'")
            }
            return .resume(after: id)
        }
        switch parameters["snapshot"]?.lowercased() {
        case nil, "false", "0", "no": return .live
        case "true", "1", "yes": return .snapshot
        case let other?: throw .badRequest("snapshot must be true or false, got '\(other)'")
        }
    }
}
