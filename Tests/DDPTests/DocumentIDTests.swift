import DDP
import Testing

@Suite struct DocumentIDTests {
    @Test(arguments: [
        (DocumentID.string("abc"), "abc"),
        (.string("-dash"), "--dash"),
        (.string("~tilde"), "-~tilde"),
        (.string("{curly"), "-{curly"),
        (.string("5f1d7a3c9b1e8a2b3c4d5e6f"), "-5f1d7a3c9b1e8a2b3c4d5e6f"),
        (.string(""), ""),
        (.objectID("5f1d7a3c9b1e8a2b3c4d5e6f"), "5f1d7a3c9b1e8a2b3c4d5e6f"),
        (.number(42), "~42"),
        (.number(-1.5), "~-1.5"),
        (.bool(true), "~true"),
        (.bool(false), "~false"),
        (.null, "~null"),
        (.undefined, "-")
    ])
    func wireFormRoundTrips(id: DocumentID, wire: String) throws {
        #expect(id.wire == wire)
        #expect(try DocumentID(wire: wire) == id)
    }

    @Test func ejsonForms() throws {
        #expect(try DocumentID(ejson: .custom(type: "oid", value: "5F1D7A3C9B1E8A2B3C4D5E6F")) == .objectID("5f1d7a3c9b1e8a2b3c4d5e6f"))
        #expect(DocumentID.objectID("5f1d7a3c9b1e8a2b3c4d5e6f").ejson == .custom(type: "oid", value: "5f1d7a3c9b1e8a2b3c4d5e6f"))
        #expect(throws: EJSONParseError.self) { try DocumentID(ejson: ["a": 1]) }
        #expect(throws: EJSONParseError.self) { try DocumentID(wire: "~[1]") }
        #expect(throws: EJSONParseError.self) { try DocumentID(wire: "~{") }
    }
}
