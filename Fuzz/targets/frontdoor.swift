// A fuzz target (`frontdoor`), compiled with the others into one binary by scripts/fuzz.sh (entry.swift
// calls the one FUZZ_TARGET names).

/// Any bytes as a request head (a request line, then `Name: value` lines): the front door's
/// decision never traps, is the same each time, and keeps its rules: a probe or a stream only
/// for a plain `GET` (no body, no Origin, no upgrade) that does not ask to close; a stream's
/// target within its bound with every parameter decodable; a refusal names the problem its
/// target has; the router's request goes with a verb the router knows.
func fuzzFrontDoor(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false).makeIterator()
    let requestLine = (lines.next() ?? "").split(separator: " ", maxSplits: 1)
    var head = RequestHead(method: String(requestLine.first ?? ""), target: String(requestLine.dropFirst().first ?? ""))
    while let line = lines.next() {
        let field = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let value = field.count == 2 ? String(field[1]) : ""
        switch field[0].lowercased() {
        case "content-length": head.contentLength = value
        case "transfer-encoding": head.hasTransferEncoding = true
        case "origin": head.hasOrigin = true
        case "upgrade": head.hasUpgrade = true
        case "connection": head.connection.append(value)
        default: break
        }
    }
    let decision = RequestClassifier.classify(head)
    if RequestClassifier.classify(head) != decision { fatalError("two decisions for one head") }
    switch decision {
    case .probe:
        if !head.isPlainGet { fatalError("a probe answered at the door that is not a plain GET") }
    case .stream:
        if !head.isPlainGet || head.asksToClose { fatalError("a stream opened at the door for \(head)") }
        if RequestClassifier.problem(head.target) != nil { fatalError("a stream with a bad target") }
        if let query = RequestClassifier.query(of: head.target), QueryString.parameters(query) == nil {
            fatalError("a stream whose query does not decode")
        }
    case .refuse(let problem, _):
        if RequestClassifier.problem(head.target) != problem { fatalError("a refusal for another problem") }
    case .router(let closes):
        if closes != (head.asksToClose || head.hasUpgrade) { fatalError("closes \(closes) for \(head)") }
        // A verb the router knows goes as it is; any other as TRACE, which no path takes.
        let routed = RequestClassifier.routedVerb(for: head.method) ?? head.method
        if !RequestClassifier.routerVerbs.contains(routed) { fatalError("routed as \(routed), which the router does not know") }
        if RequestClassifier.routerVerbs.contains(head.method), routed != head.method { fatalError("\(head.method) routed as \(routed)") }
    }
    return 0
}
