/// An EJSON object: fields in insertion order, unique keys.
///
/// Most documents are small, so fields live in one contiguous array and lookups scan it:
/// cheaper to update and to serialize than a dictionary, and order is kept for free. Past
/// `indexThreshold` fields the object also keeps a key → position index, so a wide document
/// (tens of thousands of fields) is read and updated in constant time per field, not linear.
public struct EJSONObject: Sendable {
    public struct Field: Sendable {
        public var key: String
        public var value: EJSON
        public init(key: String, value: EJSON) {
            self.key = key
            self.value = value
        }
    }

    /// Objects with more fields than this keep a key index.
    static let indexThreshold = 16

    public private(set) var fields: [Field]
    /// Position of each key in `fields`; present only when there are more than `indexThreshold` fields.
    private var positions: [String: Int]?

    public init() { fields = [] }

    /// Builds an object from fields; a repeated key keeps its first position and its last value.
    public init(_ fields: [Field]) {
        self.fields = []
        self.fields.reserveCapacity(fields.count)
        for field in fields { self[field.key] = field.value }
    }

    /// Construction without the duplicate check, for callers that already hold unique keys.
    package init(uniqueFieldsInOrder fields: [Field]) {
        self.fields = fields
        reindex()
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }
    public var keys: [String] { fields.map(\.key) }

    public func index(forKey key: String) -> Int? {
        if let positions { return positions[key] }
        return fields.firstIndex { $0.key == key }
    }

    /// Reads a field; setting `nil` removes it, setting a new key appends it.
    public subscript(key: String) -> EJSON? {
        get {
            if let positions { return positions[key].map { fields[$0].value } }
            for field in fields where field.key == key { return field.value }
            return nil
        }
        set {
            if let i = index(forKey: key) {
                if let newValue { fields[i].value = newValue } else { remove(at: i) }
            } else if let newValue {
                fields.append(Field(key: key, value: newValue))
                if positions != nil {
                    positions![key] = fields.count - 1
                } else if fields.count > Self.indexThreshold {
                    reindex()
                }
            }
        }
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> EJSON? {
        guard let i = index(forKey: key) else { return nil }
        let value = fields[i].value
        remove(at: i)
        return value
    }

    /// Removes every field whose key is in `keys`, in one pass (removing many fields one by one
    /// from a wide object would be quadratic).
    public mutating func removeValues(forKeys keys: some Sequence<String>) {
        let doomed = Set(keys)
        guard !doomed.isEmpty else { return }
        if doomed.count == 1, let key = doomed.first {
            removeValue(forKey: key)
            return
        }
        fields.removeAll { doomed.contains($0.key) }
        reindex()
    }

    /// O(n), like removing from the array: positions after `i` move down by one.
    private mutating func remove(at i: Int) {
        let key = fields.remove(at: i).key
        guard positions != nil else { return }
        if i == fields.count, fields.count > Self.indexThreshold {
            positions!.removeValue(forKey: key)
        } else {
            reindex()
        }
    }

    private mutating func reindex() {
        guard fields.count > Self.indexThreshold else {
            positions = nil
            return
        }
        var map: [String: Int] = [:]
        map.reserveCapacity(fields.count)
        for (i, field) in fields.enumerated() { map[field.key] = i }
        positions = map
    }

    public func equals(_ other: EJSONObject, keyOrderSensitive: Bool) -> Bool {
        guard fields.count == other.fields.count else { return false }
        if keyOrderSensitive {
            for i in fields.indices {
                guard fields[i].key == other.fields[i].key,
                    fields[i].value.equals(other.fields[i].value, keyOrderSensitive: true)
                else { return false }
            }
            return true
        }
        for field in fields {
            guard let theirs = other[field.key], field.value.equals(theirs, keyOrderSensitive: false) else {
                return false
            }
        }
        return true
    }
}

extension EJSONObject: Equatable {
    public static func == (lhs: EJSONObject, rhs: EJSONObject) -> Bool {
        lhs.equals(rhs, keyOrderSensitive: false)
    }
}

extension EJSONObject: Sequence {
    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }
}

extension EJSONObject: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, EJSON)...) {
        self.init(elements.map { Field(key: $0.0, value: $0.1) })
    }
}
