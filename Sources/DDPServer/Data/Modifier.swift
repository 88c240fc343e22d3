import DDP

/// Applies a MongoDB update to a document: a replacement document, or the operators
/// `$set`, `$unset`, `$inc`, `$push` (with `$each`), `$addToSet`, `$pull`, `$pop`,
/// `$min`, `$max`, `$rename`, with dotted paths. Errors are Meteor errors (400).
enum Modifier {
    /// The largest array a positional path may create by padding with nulls (MongoDB's limit).
    static let maxArrayPadding = 1_500_000

    static func apply(_ modifier: EJSONObject, to document: EJSONObject) throws(DDPError) -> EJSONObject {
        let id = document["_id"]
        let operators = modifier.keys.filter { $0.hasPrefix("$") }
        if operators.isEmpty {
            var replacement = modifier
            if let newID = replacement["_id"], let id, newID != id {
                throw DDPError.meteor(400, "The _id of a document cannot be changed")
            }
            replacement.removeValue(forKey: "_id")
            var out: EJSONObject = id.map { ["_id": $0] } ?? [:]
            for field in replacement { out[field.key] = field.value }
            return out
        }
        guard operators.count == modifier.count else {
            throw DDPError.meteor(400, "A modifier cannot mix operators and plain fields")
        }
        // Edited in place: one copy of the document, then work linear in the modifier's size
        // (a 20,000-field `$set` or `$unset` must not be quadratic).
        var doc = document
        for op in modifier {
            guard case .object(let args) = op.value else { throw DDPError.meteor(400, "\(op.key) needs an object of fields") }
            var topLevelUnsets: [String] = []
            for arg in args {
                let path = arg.key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                if path.contains(where: \.isEmpty) { throw DDPError.meteor(400, "Invalid field path '\(arg.key)'") }
                if path[0] == "_id" && op.key != "$setOnInsert" { throw DDPError.meteor(400, "The _id of a document cannot be changed") }
                if op.key == "$unset" && path.count == 1 {
                    topLevelUnsets.append(path[0])
                } else {
                    try applyOperator(op.key, path[...], arg.value, to: &doc)
                }
            }
            doc.removeValues(forKeys: topLevelUnsets)
        }
        return doc
    }

    private static func applyOperator(_ op: String, _ path: ArraySlice<String>, _ arg: EJSON, to doc: inout EJSONObject) throws(DDPError) {
        switch op {
        case "$set": try update(&doc, path) { _ throws(DDPError) in arg }
        case "$setOnInsert": break
        case "$unset": try update(&doc, path, create: false) { _ throws(DDPError) in nil }
        case "$inc":
            guard case .number(let delta) = arg else { throw DDPError.meteor(400, "Modifier $inc allowed for numbers only") }
            try update(&doc, path) { current throws(DDPError) in
                switch current {
                case nil: return .number(delta)
                case .number(let n)?: return .number(n + delta)
                default: throw DDPError.meteor(400, "Cannot apply $inc modifier to non-number")
                }
            }
        case "$min", "$max":
            try update(&doc, path) { current throws(DDPError) in
                guard let current else { return arg }
                let c = EJSON.compare(arg, current)
                return (op == "$min" ? c < 0 : c > 0) ? arg : current
            }
        case "$push", "$addToSet":
            var items = [arg]
            if case .object(let o) = arg, let each = o["$each"] {
                guard case .array(let list) = each else { throw DDPError.meteor(400, "$each needs an array") }
                items = list
            }
            try update(&doc, path) { current throws(DDPError) in
                var array: [EJSON]
                switch current {
                case nil: array = []
                case .array(let a)?: array = a
                default: throw DDPError.meteor(400, "Cannot apply \(op) modifier to non-array")
                }
                for item in items where op == "$push" || !array.contains(item) { array.append(item) }
                return .array(array)
            }
        case "$pull":
            try update(&doc, path, create: false) { current throws(DDPError) in
                guard let current else { return nil }
                guard case .array(let array) = current else { throw DDPError.meteor(400, "Cannot apply $pull modifier to non-array") }
                if case .object(let condition) = arg, condition.fields.first?.key.hasPrefix("$") == true {
                    let test: Selector
                    do { test = try Selector(.object(["v": arg])) } catch { throw DDPError.meteor(400, "Invalid $pull condition: \(error)") }
                    return .array(array.filter { !test.matches(["v": $0]) })
                }
                return .array(array.filter { $0 != arg })
            }
        case "$pop":
            try update(&doc, path, create: false) { current throws(DDPError) in
                guard let current else { return nil }
                guard case .array(var array) = current else { throw DDPError.meteor(400, "Cannot apply $pop modifier to non-array") }
                if !array.isEmpty { if (arg.numberValue ?? 1) < 0 { array.removeFirst() } else { array.removeLast() } }
                return .array(array)
            }
        case "$rename":
            guard case .string(let target) = arg else { throw DDPError.meteor(400, "$rename target must be a string") }
            var moved: EJSON?
            try update(&doc, path, create: false) { current throws(DDPError) in
                moved = current
                return nil
            }
            if let moved {
                let targetPath = target.split(separator: ".").map(String.init)
                try update(&doc, targetPath[...]) { _ throws(DDPError) in moved }
            }
        default:
            throw DDPError.meteor(400, "Unsupported modifier \(op)")
        }
    }

    /// Replaces the value at `path` with `transform(old)`; `nil` removes it. Creates objects on the way when asked.
    private static func update(
        _ object: inout EJSONObject, _ path: ArraySlice<String>, create: Bool = true,
        _ transform: (EJSON?) throws(DDPError) -> EJSON?
    ) throws(DDPError) {
        guard let key = path.first else { return }
        let rest = path.dropFirst()
        if rest.isEmpty {
            object[key] = try transform(object[key])
            return
        }
        var child = object[key] ?? (create ? .object([:]) : .null)
        if case .null = child, object[key] == nil { return }
        try update(&child, rest, create: create, transform)
        object[key] = child
    }

    private static func update(
        _ value: inout EJSON, _ path: ArraySlice<String>, create: Bool,
        _ transform: (EJSON?) throws(DDPError) -> EJSON?
    ) throws(DDPError) {
        guard let key = path.first else { return }
        let rest = path.dropFirst()
        switch value {
        case .object(var object):
            // Drops the enum's reference, so the edit happens in place rather than on a copy;
            // the object goes back on every exit.
            value = .null
            defer { value = .object(object) }
            try update(&object, path, create: create, transform)
        case .array(var array):
            value = .null
            defer { value = .array(array) }
            guard let index = Int(key), index >= 0 else { throw DDPError.meteor(400, "Cannot use the part '\(key)' to traverse an array") }
            if create && index >= array.count {
                // MongoDB refuses to pad an array past 1,500,000 elements; so do we (an index from a client must
                // not make the server allocate without bound).
                guard index < Modifier.maxArrayPadding else {
                    throw DDPError.meteor(400, "can't backfill array to larger than \(Modifier.maxArrayPadding) elements")
                }
                array.reserveCapacity(index + 1)
                while index >= array.count { array.append(.null) }
            }
            guard index < array.count else { return }
            if rest.isEmpty {
                array[index] = try transform(array[index]) ?? .null
            } else {
                try update(&array[index], rest, create: create, transform)
            }
        default:
            if create { throw DDPError.meteor(400, "Cannot create field '\(key)' inside a \(value.typeName)") }
        }
    }
}
