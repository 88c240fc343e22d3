// A fuzz target (`query`), compiled with the others into one binary by scripts/fuzz.sh (entry.swift
// calls the one FUZZ_TARGET names).

/// Any bytes as a query string (and as a `Last-Event-ID`): checking, reading and decoding
/// parameters never trap; a query that passes the check has every parameter decodable; the
/// `selector` and `sort` values are parsed as the collection route parses them (EJSON, then a
/// selector matched against a document).
func fuzzQuery(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let query = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let bad = QueryString.firstUndecodableParameter(query)
    for name in ["selector", "sort", "fields", "skip", "limit", "lastEventId", "snapshot", "token"] {
        let value = QueryString.value(query, name)
        if bad == nil, query.contains(name) == false, value != nil {
            // A parameter can only be found under a name the query spells, encoded or not.
            if !query.contains("%") && !query.contains("+") { fatalError("found '\(name)' in a query without it") }
        }
        guard let value else { continue }
        if name == "lastEventId" { _ = QueryString.eventID(value) }
        if name == "selector" || name == "sort" || name == "fields", let json = try? EJSONParser.parse(value) {
            if name == "selector", let selector = try? Selector(json) { _ = selector.matches(["a": 1, "b": ["c": [1, "x"]]]) }
            if name == "sort", let keys = json.arrayValue { for key in keys { _ = EJSON.compare(key, json) } }
        }
    }
    if bad == nil {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if QueryString.decode(parts[0]) == nil { fatalError("the check passed an undecodable name") }
            if parts.count == 2, QueryString.decode(parts[1]) == nil { fatalError("the check passed an undecodable value") }
        }
    }
    _ = QueryString.eventID(query)
    return 0
}
