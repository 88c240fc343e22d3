// A fuzz target (`selector`), compiled with the others into one binary with Sources/DDP by scripts/fuzz.sh
// (entry.swift calls the one FUZZ_TARGET names).

/// Any bytes as `[selector, document, sort, fields, …]`: compiling the selector, the sort and the
/// projection, matching, taking sort keys, projecting, ordering values (sorts) and document-id
/// decoding never trap.
func fuzzSelector(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let value = try? EJSONParser.parse(UnsafeBufferPointer(start: data, count: size)) else { return 0 }
    let items = value.arrayValue ?? [value]
    let document = items.dropFirst().first?.objectValue ?? [:]
    if let selector = try? Selector(items.first ?? .null) {
        _ = selector.matches(document)
        _ = selector.indexableConditions
    }
    if items.count > 2, let sort = try? SortSpec(items[2]), let key = try? sort.key(of: .object(document)) {
        _ = try? sort.compare(key, key)
    }
    if items.count > 3, let projection = try? Projection(items[3]) {
        _ = try? projection.apply(document)
    }
    for item in items {
        _ = EJSON.compare(item, items.first ?? .null)
        _ = EJSON.minimongoCompare(item, items.first)
        _ = EJSON.minimongoEquals(item, items.first ?? .null)
        if let text = item.stringValue { _ = try? DocumentID(wire: text) }
        _ = try? DocumentID(ejson: item)
    }
    return 0
}
