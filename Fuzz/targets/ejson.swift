// A fuzz target (`ejson`), compiled with the others into one binary with Sources/DDP by scripts/fuzz.sh
// (entry.swift calls the one FUZZ_TARGET names).

/// Any bytes: the parser answers a value or an error, never traps; what parses writes back
/// to text that parses to an equal value.
func fuzzEJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    guard let value = try? EJSONParser.parse(bytes) else { return 0 }
    let written = EJSONWriter.encode(value)
    guard let again = try? EJSONParser.parse(written) else { fatalError("written EJSON does not parse: \(String(decoding: written, as: UTF8.self))") }
    guard value == again else { fatalError("round trip changed the value: \(String(decoding: written, as: UTF8.self))") }
    return 0
}
