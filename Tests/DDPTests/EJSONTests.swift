import DDP
import Foundation
import Testing

@Suite struct EJSONTests {
    func parse(_ text: String) throws -> EJSON { try EJSONParser.parse(text) }
    func text(_ value: EJSON) -> String { value.description }

    @Test func plainJSONRoundTripsWithKeyOrder() throws {
        let source = #"{"b":1,"a":[true,false,null,"x",-2.5,1e+21],"c":{"z":{},"y":[]}}"#
        let value = try parse(source)
        #expect(text(value) == source)
        #expect(value["b"] == .number(1))
        #expect(value.objectValue?.keys == ["b", "a", "c"])
    }

    @Test func typedFormsParseToTheirValues() throws {
        #expect(try parse(#"{"$date":1704067200000}"#) == .date(1_704_067_200_000))
        #expect(try parse(#"{"$binary":"AAECf4D9/v8="}"#) == .binary([0, 1, 2, 127, 128, 253, 254, 255]))
        #expect(try parse(#"{"$InfNaN":1}"#) == .number(.infinity))
        #expect(try parse(#"{"$InfNaN":-1}"#) == .number(-.infinity))
        let nan = try parse(#"{"$InfNaN":0}"#)
        #expect(nan.numberValue?.isNaN == true)
        #expect(nan == .number(.nan), "NaN equals NaN, as in EJSON.equals")
        #expect(try parse(#"{"$regexp":"^a.*","$flags":"i"}"#) == .regexp(source: "^a.*", flags: "i"))
        #expect(try parse(#"{"$flags":"i","$regexp":"^a"}"#) == .regexp(source: "^a", flags: "i"))
        #expect(try parse(#"{"$type":"oid","$value":"5f1d7a3c9b1e8a2b3c4d5e6f"}"#) == .custom(type: "oid", value: "5f1d7a3c9b1e8a2b3c4d5e6f"))
    }

    @Test func typedFormsSerialize() {
        #expect(text(.date(1_700_000_000_000)) == #"{"$date":1700000000000}"#)
        #expect(text(.binary([0, 1, 2])) == #"{"$binary":"AAEC"}"#)
        #expect(text(.number(.infinity)) == #"{"$InfNaN":1}"#)
        #expect(text(.number(-.infinity)) == #"{"$InfNaN":-1}"#)
        #expect(text(.number(.nan)) == #"{"$InfNaN":0}"#)
        #expect(text(.regexp(source: "a\\d", flags: "g")) == #"{"$regexp":"a\\d","$flags":"g"}"#)
        #expect(text(.custom(type: "oid", value: "abc")) == #"{"$type":"oid","$value":"abc"}"#)
    }

    @Test func escapeKeepsOneLevelLiteralAndConvertsBelowIt() throws {
        let value = try parse(#"{"$escape":{"$date":{"$date":5}}}"#)
        guard case .object(let outer) = value else {
            Issue.record("expected an object")
            return
        }
        #expect(outer.keys == ["$date"])
        #expect(outer["$date"] == .date(5))
        // Serializing an object that looks like a typed form wraps it again.
        #expect(text(value) == #"{"$escape":{"$date":{"$date":5}}}"#)
        let plain: EJSON = ["$type": "x", "$value": 1]
        #expect(text(plain) == #"{"$escape":{"$type":"x","$value":1}}"#)
        #expect(try parse(text(plain)) == plain)
        // "$escape" among other keys is an ordinary key whose value is converted.
        let mixed = try parse(#"{"$escape":{"$date":7},"other":1}"#)
        #expect(mixed["$escape"] == .date(7))
        #expect(mixed["other"] == 1)
    }

    @Test func nestedTypedValuesRoundTrip() throws {
        let source =
            #"{"when":{"$date":1704164645678},"blob":{"$binary":"AAECf4D9/v8="},"nested":{"a":1,"b":{"c":[1,2,{"d":"x"}]},"s":"str","f":1.5,"t":true,"z":null}}"#
        let value = try parse(source)
        #expect(text(value) == source)
        #expect(value["nested"]?["b"]?["c"]?.arrayValue?[2]["d"] == "x")
    }

    @Test func stringsEscapeAndUnicode() throws {
        let value = try parse(#""a\"b\\c\/d\n\t\u00e9\ud83d\ude00\u0001""#)
        #expect(value == .string("a\"b\\c/d\n\té😀\u{01}"))
        #expect(text(value) == #""a\"b\\c/d\n\té😀\u0001""#)
        #expect(try parse(#""\ud800x""#) == .string("\u{FFFD}x"), "a lone surrogate becomes U+FFFD")
        #expect(try parse("\"héllo wörld\"") == .string("héllo wörld"))
    }

    @Test func numbers() throws {
        #expect(try parse("0") == 0)
        #expect(try parse("-0.5") == .number(-0.5))
        #expect(try parse("1.5e3") == .number(1500))
        #expect(try parse("12345678901234567890") == .number(12_345_678_901_234_567_890))
        #expect(text(.number(1_704_067_200_000)) == "1704067200000")
        #expect(text(.number(-3)) == "-3")
        #expect(text(.number(0.1)) == "0.1")
        #expect(text(.number(-0.0)) == "0")
    }

    @Test func duplicateKeysKeepTheLastValueInTheFirstPlace() throws {
        let value = try parse(#"{"a":1,"b":2,"a":3}"#)
        #expect(text(value) == #"{"a":3,"b":2}"#)
        let many = "{" + (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + ",\"k3\":99}"
        let big = try parse(many)
        #expect(big.objectValue?.count == 40)
        #expect(big["k3"] == 99)
    }

    @Test(arguments: [
        ("", "unexpected end of input"),
        ("{", "expected a string key in object"),
        ("{\"a\":1,}", "expected a string key in object"),
        ("[1,2", "unterminated array"),
        ("[1 2]", "expected ',' or ']' in array"),
        ("\"abc", "unterminated string"),
        ("tru", "unexpected end of input"),
        ("nul1", "invalid literal, expected 'null'"),
        ("01", "leading zeros are not allowed"),
        ("1.", "expected a digit after '.'"),
        ("-", "expected a digit"),
        ("1e", "expected a digit in exponent"),
        ("\"\\x\"", "invalid escape '\\x'"),
        ("\"\\u12G4\"", "invalid hex digit in \\u escape"),
        ("[1] x", "unexpected data after the value"),
        ("{\"$date\":\"soon\"}", "$date must be a number of milliseconds, got string"),
        ("{\"$binary\":\"***\"}", "$binary is not valid base64"),
        ("{\"$binary\":5}", "$binary must be a base64 string, got number"),
        ("{\"$escape\":3}", "$escape must be an object, got number"),
        ("{\"$type\":1,\"$value\":2}", "$type must be a string, got number"),
        ("{\"$InfNaN\":\"x\"}", "$InfNaN must be 1, -1 or 0, got string"),
        ("@", "unexpected character '@'")
    ])
    func malformedInputGivesAPreciseError(input: String, reason: String) {
        #expect(throws: EJSONParseError.self) { try EJSONParser.parse(input) }
        do {
            _ = try EJSONParser.parse(input)
        } catch {
            #expect(error.reason == reason, "input \(input)")
        }
    }

    @Test func controlCharactersAndInvalidUTF8AreRejected() {
        #expect(throws: EJSONParseError.self) { try EJSONParser.parse([0x22, 0x0A, 0x22]) }
        #expect(throws: EJSONParseError.self) { try EJSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
    }

    @Test func nestingDepthIsLimited() throws {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        do {
            _ = try EJSONParser.parse(deep)
            Issue.record("deep input must be refused")
        } catch {
            #expect(error.reason == "nesting deeper than 128 levels")
        }
        let ok = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: Never.self) { try EJSONParser.parse(ok) }
        #expect(throws: EJSONParseError.self) { try EJSONParser.parse(ok, maxDepth: 50) }
    }

    @Test func equalityFollowsEJSONEquals() {
        let a: EJSON = ["x": 1, "y": ["z": .date(5)]]
        let b: EJSON = ["y": ["z": .date(5)], "x": 1]
        #expect(a == b)
        #expect(!a.equals(b, keyOrderSensitive: true))
        #expect(a.equals(a, keyOrderSensitive: true))
        #expect(EJSON.binary([1, 2]) != .binary([1, 3]))
        #expect(EJSON.date(1) != .number(1))
        #expect(EJSON.array([1, 2]) != .array([2, 1]))
        #expect(EJSON.regexp(source: "a", flags: "") != .regexp(source: "a", flags: "i"))
        #expect(EJSON.object(["a": 1]) != .object(["a": 1, "b": 2]))
    }

    @Test func agreesWithFoundationOnPlainJSON() throws {
        let sample = #"{"msg":"added","collection":"tasks","id":"x","fields":{"text":"é \"q\"","n":[1,2.25,-3],"ok":true,"none":null}}"#
        let ours = try parse(sample)
        let reparsed = try JSONSerialization.jsonObject(with: Data(text(ours).utf8)) as? NSDictionary
        let original = try JSONSerialization.jsonObject(with: Data(sample.utf8)) as? NSDictionary
        #expect(reparsed == original)
    }
}

/// Inputs the fuzzer (scripts/fuzz.sh) found, kept as regression tests.
@Suite struct FuzzFindingsTests {
    @Test func aDateOutOfRangeIsRefusedNotWrittenAsNull() {
        // Was parsed as an infinite date and written as {"$date":null}, which nothing reads back.
        #expect(throws: EJSONParseError.self) { try EJSONParser.parse(#"[{"when":{"$date":1e400}}]"#) }
        #expect(throws: EJSONParseError.self) { try EJSONParser.parse(#"{"$date":-1e999}"#) }
        #expect((try? EJSONParser.parse(#"{"$date":1700000000000}"#)) == .date(1_700_000_000_000))
    }

    @Test func anEscapeInsideAnEscapeIsConvertedAsMeteorDoes() throws {
        // Meteor: fromJSONValue({$escape: X}) converts each member of X. So the inner
        // {"$escape":{}} is an escape form (the empty object), and the value is {"$escape": {}}.
        let value = try EJSONParser.parse(#"{"$escape":{"$escape":{"$escape":{}}}}"#)
        #expect(value == ["$escape": [:]])
        let written = EJSONWriter.encode(value)
        #expect(String(decoding: written, as: UTF8.self) == #"{"$escape":{"$escape":{}}}"#)
        #expect(try EJSONParser.parse(written) == value, "the round trip keeps the value")
        // A member named $escape of an escaped object, holding a typed form, is converted too.
        #expect(try EJSONParser.parse(#"{"$escape":{"$escape":{"$date":5}}}"#) == ["$escape": .date(5)])
    }
}

@Suite struct EJSONKeyOrderTests {
    @Test func keysSortedMakesValuesThatDifferOnlyInKeyOrderOne() throws {
        let a = try EJSONParser.parse(#"[{"b":{"y":1,"x":[{"d":1,"c":2}]},"a":{"$date":5}},"s"]"#)
        let b = try EJSONParser.parse(#"[{"a":{"$date":5},"b":{"x":[{"c":2,"d":1}],"y":1}},"s"]"#)
        #expect(EJSONWriter.encode(a) != EJSONWriter.encode(b))
        #expect(EJSONWriter.encode(a.keysSorted) == EJSONWriter.encode(b.keysSorted))
        #expect(String(decoding: EJSONWriter.encode(a.keysSorted), as: UTF8.self) == #"[{"a":{"$date":5},"b":{"x":[{"c":2,"d":1}],"y":1}},"s"]"#)
        // Arrays keep their order.
        #expect(try EJSONParser.parse("[2,1]").keysSorted != EJSONParser.parse("[1,2]").keysSorted)
    }
}

@Suite struct DocumentCacheEstimateTests {
    /// The estimate kept change by change equals the estimate of the documents as they are.
    @Test func theEstimateKeptChangeByChangeIsTheEstimateOfWhatIsHeld() {
        var cache = DocumentCache()
        func recomputed() -> Int {
            cache.collections.values.reduce(0) { sum, collection in
                collection.documents.reduce(sum) { $0 + DocumentCache.cost(id: $1.key, $1.value) }
            }
        }
        var seed = UInt64(42)
        func next(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(bound))
        }
        for step in 0..<2_000 {
            let id = "d\(next(40))"
            let collection = next(2) == 0 ? "a" : "b"
            let value: EJSON =
                switch next(4) {
                case 0: .string(String(repeating: "x", count: next(50)))
                case 1: .number(Double(step))
                case 2: ["nested": .array([1, "two", ["k": .bool(true)]])]
                default: .null
                }
            let message: ServerMessage =
                switch next(5) {
                case 0, 1: .added(collection: collection, id: id, fields: EJSONObject([.init(key: "f\(next(6))", value: value)]))
                case 2: .changed(collection: collection, id: id, fields: EJSONObject([.init(key: "f\(next(6))", value: value)]), cleared: [])
                case 3: .changed(collection: collection, id: id, fields: [:], cleared: ["f\(next(6))", "f\(next(6))"])
                default: .removed(collection: collection, id: id)
                }
            _ = cache.apply(message)
            #expect(cache.estimatedBytes == recomputed(), "step \(step): \(message)")
            if cache.estimatedBytes != recomputed() { return }
        }
        #expect(cache.documentCount > 0)
    }
}
