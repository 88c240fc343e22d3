import Foundation

/// Serializes EJSON values to compact UTF-8 text, as `EJSON.stringify` does: typed
/// values become their `$` forms, and plain objects that would read back as a typed
/// form are wrapped in `$escape`.
public enum EJSONWriter {
    public static func encode(_ value: EJSON) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(value, into: &out)
        return out
    }

    public static func write(_ value: EJSON, into out: inout [UInt8]) {
        switch value {
        case .null: appendLiteral("null", to: &out)
        case .bool(let b): appendLiteral(b ? "true" : "false", to: &out)
        case .number(let n):
            if n.isFinite {
                writeNumber(n, into: &out)
            } else {
                appendLiteral("{\"$InfNaN\":", to: &out)
                appendLiteral(n.isNaN ? "0" : n > 0 ? "1" : "-1", to: &out)
                out.append(UInt8(ascii: "}"))
            }
        case .string(let s): writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            if needsEscape(object) {
                appendLiteral("{\"$escape\":", to: &out)
                writeMembers(object, into: &out)
                out.append(UInt8(ascii: "}"))
            } else {
                writeMembers(object, into: &out)
            }
        case .date(let ms):
            appendLiteral("{\"$date\":", to: &out)
            if ms.isFinite { writeNumber(ms, into: &out) } else { appendLiteral("null", to: &out) }
            out.append(UInt8(ascii: "}"))
        case .binary(let bytes):
            appendLiteral("{\"$binary\":\"", to: &out)
            out.append(contentsOf: Data(bytes).base64EncodedString().utf8)
            appendLiteral("\"}", to: &out)
        case .regexp(let source, let flags):
            appendLiteral("{\"$regexp\":", to: &out)
            writeString(source, into: &out)
            appendLiteral(",\"$flags\":", to: &out)
            writeString(flags, into: &out)
            out.append(UInt8(ascii: "}"))
        case .custom(let type, let inner):
            appendLiteral("{\"$type\":", to: &out)
            writeString(type, into: &out)
            appendLiteral(",\"$value\":", to: &out)
            write(inner, into: &out)
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Writes `{"k":v,...}` for an object's members without the typed-form check.
    public static func writeMembers(_ object: EJSONObject, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for field in object.fields {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            writeString(field.key, into: &out)
            out.append(UInt8(ascii: ":"))
            write(field.value, into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Whether a plain object has the shape of a typed form and must travel inside `$escape`.
    static func needsEscape(_ object: EJSONObject) -> Bool {
        let fields = object.fields
        guard fields.count == 1 || fields.count == 2, fields[0].key.utf8.first == UInt8(ascii: "$") else { return false }
        if fields.count == 1 {
            switch fields[0].key {
            case "$date", "$binary", "$InfNaN", "$escape": return true
            default: return false
            }
        }
        let keys = Set(fields.map(\.key))
        return keys == ["$type", "$value"] || keys == ["$regexp", "$flags"]
    }

    @inline(__always)
    package static func appendLiteral(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Integral values within ±2^53 print as integers (as JavaScript does); others in shortest round-trip form.
    static func writeNumber(_ n: Double, into out: inout [UInt8]) {
        if n.rounded(.towardZero) == n, abs(n) < 9.007199254740992e15 {
            writeInteger(Int64(n), into: &out)
        } else {
            out.append(contentsOf: n.description.utf8)
        }
    }

    package static func writeInteger(_ value: Int64, into out: inout [UInt8]) {
        if value == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var v = value.magnitude
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while v > 0 {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
                count += 1
            }
            out.append(contentsOf: buffer[(20 - count)...])
        }
    }

    public static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            for i in 0..<utf8.count {
                let byte = utf8[i]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i])) }
                runStart = i + 1
                switch byte {
                case UInt8(ascii: "\""): appendLiteral("\\\"", to: &out)
                case UInt8(ascii: "\\"): appendLiteral("\\\\", to: &out)
                case 0x0A: appendLiteral("\\n", to: &out)
                case 0x0D: appendLiteral("\\r", to: &out)
                case 0x09: appendLiteral("\\t", to: &out)
                case 0x08: appendLiteral("\\b", to: &out)
                case 0x0C: appendLiteral("\\f", to: &out)
                default:
                    appendLiteral("\\u00", to: &out)
                    let hex: StaticString = "0123456789abcdef"
                    out.append(hex.utf8Start[Int(byte >> 4)])
                    out.append(hex.utf8Start[Int(byte & 0x0F)])
                }
            }
            if runStart < utf8.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}
