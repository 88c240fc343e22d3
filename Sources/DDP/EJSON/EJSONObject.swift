/// An EJSON object: fields in insertion order, unique keys.
///
/// Documents are small, so fields live in one contiguous array and lookups scan it:
/// cheaper to update and to serialize than a dictionary, and order is kept for free.
public struct EJSONObject: Sendable {
    public struct Field: Sendable {
        public var key: String
        public var value: EJSON
        public init(key: String, value: EJSON) {
            self.key = key
            self.value = value
        }
    }

    public private(set) var fields: [Field]

    public init() { fields = [] }

    /// Builds an object from fields; a repeated key keeps its first position and its last value.
    public init(_ fields: [Field]) {
        self.fields = []
        self.fields.reserveCapacity(fields.count)
        for field in fields { self[field.key] = field.value }
    }

    /// Trusted construction: the caller guarantees unique keys.
    init(uniqueFields: [Field]) { self.fields = uniqueFields }

    /// Construction without the duplicate check, for callers that already hold unique keys.
    package init(uniqueFieldsInOrder fields: [Field]) { self.fields = fields }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }
    public var keys: [String] { fields.map(\.key) }

    public func index(forKey key: String) -> Int? {
        fields.firstIndex { $0.key == key }
    }

    /// Reads a field; setting `nil` removes it, setting a new key appends it.
    public subscript(key: String) -> EJSON? {
        get {
            for field in fields where field.key == key { return field.value }
            return nil
        }
        set {
            if let i = index(forKey: key) {
                if let newValue { fields[i].value = newValue } else { fields.remove(at: i) }
            } else if let newValue {
                fields.append(Field(key: key, value: newValue))
            }
        }
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> EJSON? {
        guard let i = index(forKey: key) else { return nil }
        return fields.remove(at: i).value
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
