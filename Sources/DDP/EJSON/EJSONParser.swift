import Foundation

/// Parses EJSON text from UTF-8 bytes in one pass: JSON syntax and Meteor's typed
/// forms (`$date`, `$binary`, `$escape`, `$type`/`$value`, `$InfNaN`, `$regexp`/`$flags`)
/// are recognised while the tree is built, without an intermediate JSON value.
public struct EJSONParser: ~Copyable {
    /// Deepest array/object nesting accepted; deeper input is an error, not a stack overflow.
    public static let defaultMaxDepth = 128

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private let maxDepth: Int
    private var depth = 0

    private init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// Parses one EJSON value; surrounding whitespace is allowed, anything else after it is an error.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth) throws(EJSONParseError) -> EJSON {
        var parser = EJSONParser(bytes: bytes, maxDepth: maxDepth)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the value") }
        return value
    }

    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth) throws(EJSONParseError) -> EJSON {
        let result: Result<EJSON, EJSONParseError>? = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(EJSONParseError) in try parse(buffer, maxDepth: maxDepth) }
        }
        if let result { return try result.get() }
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { buffer throws(EJSONParseError) in try parse(buffer, maxDepth: maxDepth) }
    }

    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(EJSONParseError) -> EJSON {
        var text = text
        let result: Result<EJSON, EJSONParseError> = text.withUTF8 { buffer in
            Result { () throws(EJSONParseError) in try parse(buffer, maxDepth: maxDepth) }
        }
        return try result.get()
    }

    // MARK: - Values

    private func error(_ reason: String, at offset: Int? = nil) -> EJSONParseError {
        EJSONParseError(offset: offset ?? index, reason: reason)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue(convert: Bool = true) throws(EJSONParseError) -> EJSON {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            let start = index
            let object = try parseObject(convert: convert)
            return try convert ? Self.convertTyped(object, at: start) : .object(object)
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character '\(Self.printable(bytes[index]))'")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(EJSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("unexpected end of input") }
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for i in 0..<count where bytes[index + i] != expected[i] {
            throw error("invalid literal, expected '\(literal)'")
        }
        index += count
    }

    private mutating func enterContainer() throws(EJSONParseError) {
        depth += 1
        if depth > maxDepth { throw error("nesting deeper than \(maxDepth) levels") }
        index += 1
        skipWhitespace()
    }

    private mutating func parseArray() throws(EJSONParseError) -> EJSON {
        try enterContainer()
        var elements: [EJSON] = []
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated array") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return .array(elements)
            default:
                throw error("expected ',' or ']' in array")
            }
        }
    }

    /// Parses an object's members. When the first key is `$escape`, its object value is
    /// kept unconverted at its own level, as `$escape` asks (its members still are converted).
    private mutating func parseObject(convert: Bool) throws(EJSONParseError) -> EJSONObject {
        try enterContainer()
        // A repeated key replaces the earlier value in place, as `JSON.parse` does.
        var object = EJSONObject()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return object
        }
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("expected a string key in object")
            }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after object key") }
            index += 1
            skipWhitespace()
            // Only an object that is itself converted can be an `$escape` form. Inside an escaped
            // object (`convert == false`) a member named `$escape` is an ordinary member whose value
            // is converted, as Meteor's `fromJSONValue` converts each member of `$escape` (found by
            // fuzzing: `{"$escape":{"$escape":{"$escape":{}}}}` did not survive a round trip).
            let escapeCandidate =
                convert && object.isEmpty && key == "$escape" && index < bytes.count && bytes[index] == UInt8(ascii: "{")
            let value = try parseValue(convert: !escapeCandidate)
            object[key] = value
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated object") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return object
            default:
                throw error("expected ',' or '}' in object")
            }
        }
    }

    // MARK: - Typed forms

    /// Turns `{"$date": n}` and the other typed forms into their values; other objects stay objects.
    static func convertTyped(_ object: EJSONObject, at offset: Int) throws(EJSONParseError) -> EJSON {
        let fields = object.fields
        guard fields.count == 1 || fields.count == 2, fields[0].key.utf8.first == UInt8(ascii: "$") else {
            return .object(object)
        }
        if fields.count == 1 {
            let value = fields[0].value
            switch fields[0].key {
            case "$date":
                guard case .number(let ms) = value else {
                    throw EJSONParseError(offset: offset, reason: "$date must be a number of milliseconds, got \(value.typeName)")
                }
                // A date out of range (`1e400` reads as infinity) has no EJSON form: it would be
                // written as `{"$date":null}`, which the upstream refuses (found by fuzzing).
                guard ms.isFinite else {
                    throw EJSONParseError(offset: offset, reason: "$date must be a finite number of milliseconds")
                }
                return .date(ms)
            case "$binary":
                guard case .string(let text) = value else {
                    throw EJSONParseError(offset: offset, reason: "$binary must be a base64 string, got \(value.typeName)")
                }
                guard let data = Data(base64Encoded: text) else {
                    throw EJSONParseError(offset: offset, reason: "$binary is not valid base64")
                }
                return .binary([UInt8](data))
            case "$InfNaN":
                guard case .number(let sign) = value else {
                    throw EJSONParseError(offset: offset, reason: "$InfNaN must be 1, -1 or 0, got \(value.typeName)")
                }
                return .number(sign > 0 ? .infinity : sign < 0 ? -.infinity : .nan)
            case "$escape":
                switch value {
                case .object(let inner): return .object(inner)
                default:
                    throw EJSONParseError(offset: offset, reason: "$escape must be an object, got \(value.typeName)")
                }
            default:
                return .object(object)
            }
        }
        // Two members: {$type, $value} or {$regexp, $flags}, in either order.
        if let type = object["$type"], let value = object["$value"] {
            guard case .string(let name) = type else {
                throw EJSONParseError(offset: offset, reason: "$type must be a string, got \(type.typeName)")
            }
            return .custom(type: name, value: value)
        }
        if let source = object["$regexp"], let flags = object["$flags"] {
            guard case .string(let s) = source, case .string(let f) = flags else {
                throw EJSONParseError(offset: offset, reason: "$regexp and $flags must be strings")
            }
            return .regexp(source: s, flags: f)
        }
        // An object that began with "$escape" but had more members: its value is an ordinary EJSON value.
        if fields[0].key == "$escape", case .object(let inner) = fields[0].value {
            var copy = object
            copy["$escape"] = try convertTyped(inner, at: offset)
            return .object(copy)
        }
        return .object(object)
    }

    // MARK: - Strings

    private mutating func parseString() throws(EJSONParseError) -> String {
        let start = index
        index += 1
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[(start + 1)..<index])
                index += 1
                if ascii { return String(decoding: slice, as: UTF8.self) }
                guard let text = String(validating: slice, as: UTF8.self) else {
                    throw error("invalid UTF-8 in string", at: start)
                }
                return text
            }
            if byte == UInt8(ascii: "\\") {
                index = start
                return try parseEscapedString()
            }
            if byte < 0x20 { throw error("unescaped control character in string") }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        throw error("unterminated string", at: start)
    }

    private mutating func parseEscapedString() throws(EJSONParseError) -> String {
        let start = index
        index += 1
        var out: [UInt8] = []
        out.reserveCapacity(32)
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: out, as: UTF8.self) else {
                    throw error("invalid UTF-8 in string", at: start)
                }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unterminated string", at: start) }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"): Self.appendUTF8(try parseUnicodeEscape(), to: &out)
                default: throw error("invalid escape '\\\(Self.printable(escaped))'", at: index - 2)
                }
            default:
                if byte < 0x20 { throw error("unescaped control character in string") }
                out.append(byte)
                index += 1
            }
        }
        throw error("unterminated string", at: start)
    }

    /// Reads the hex digits after `\u` (and a following low surrogate); a lone surrogate becomes U+FFFD.
    private mutating func parseUnicodeEscape() throws(EJSONParseError) -> Unicode.Scalar {
        let first = try readHex4()
        if (0xD800...0xDBFF).contains(first) {
            if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") {
                let save = index
                index += 2
                let second = try readHex4()
                if (0xDC00...0xDFFF).contains(second) {
                    let value = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                    return Unicode.Scalar(value) ?? "\u{FFFD}"
                }
                index = save
            }
            return "\u{FFFD}"
        }
        return Unicode.Scalar(first) ?? "\u{FFFD}"
    }

    private mutating func readHex4() throws(EJSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private static func appendUTF8(_ scalar: Unicode.Scalar, to out: inout [UInt8]) {
        out.append(contentsOf: UTF8.encode(scalar)!)
    }

    private static func printable(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
    }

    // MARK: - Numbers

    private mutating func parseNumber() throws(EJSONParseError) -> Double {
        let start = index
        var negative = false
        if bytes[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
            throw error("expected a digit")
        }
        var integer: UInt64 = 0
        var digits = 0
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            digits = 1
            if index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                throw error("leading zeros are not allowed")
            }
        } else {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                if digits < 18 { integer = integer &* 10 &+ UInt64(bytes[index] - UInt8(ascii: "0")) }
                digits += 1
                index += 1
            }
        }
        var simple = digits <= 15
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            simple = false
            index += 1
            guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
                throw error("expected a digit after '.'")
            }
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            simple = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
                throw error("expected a digit in exponent")
            }
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        }
        if simple {
            let value = Double(integer)
            return negative ? -value : value
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text) else { throw error("invalid number", at: start) }
        return value
    }
}
