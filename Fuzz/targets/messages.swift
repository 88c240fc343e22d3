// A fuzz target (`messages`), compiled with the others into one binary with Sources/DDP by scripts/fuzz.sh
// (entry.swift calls the one FUZZ_TARGET names).

/// Any bytes as a DDP message in either direction: decoded or refused, never a trap; a decoded
/// client message encodes and decodes again; a server message applies to a document cache.
func fuzzMessages(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let value = try? EJSONParser.parse(UnsafeBufferPointer(start: data, count: size)) else { return 0 }
    if let message = try? ServerMessage.decode(value) {
        _ = String(describing: message)
        var cache = DocumentCache()
        _ = cache.apply(message)
        _ = DDPError(ejson: value).description
    }
    if let message = try? ClientMessage.decode(value) {
        let encoded = message.encode()
        guard (try? EJSONParser.parse(encoded)).flatMap({ try? ClientMessage.decode($0) }) != nil else {
            fatalError("an encoded client message does not decode: \(String(decoding: encoded, as: UTF8.self))")
        }
    }
    return 0
}
