// libFuzzer entry point, compiled into one module with Sources/DDP by scripts/fuzz.sh.

/// Any bytes as `[selector, document, …]`: parsing the selector and matching never trap, and
/// neither do ordering values (sorts) and document-id decoding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let value = try? EJSONParser.parse(UnsafeBufferPointer(start: data, count: size)) else { return 0 }
    let items = value.arrayValue ?? [value]
    let document = items.dropFirst().first?.objectValue ?? [:]
    if let selector = try? Selector(items.first ?? .null) {
        _ = selector.matches(document)
    }
    for item in items {
        _ = EJSON.compare(item, items.first ?? .null)
        if let text = item.stringValue { _ = try? DocumentID(wire: text) }
        _ = try? DocumentID(ejson: item)
    }
    return 0
}
