import DDP
import Testing

@Suite struct MessageTests {
    /// Every server frame of the transcripts decodes and re-encodes byte for byte.
    @Test func serverFramesRoundTripByteForByte() throws {
        let frames = try Fixtures.lines("server-frames.txt")
        #expect(frames.count == 126)
        for frame in frames {
            let message = try #require(try ServerMessage.decode(bytes: Array(frame.utf8)), "frame \(frame)")
            #expect(String(decoding: message.encode(), as: UTF8.self) == frame)
        }
    }

    @Test func clientMessagesOfTheTranscriptsDecode() throws {
        var decoded = 0
        for entry in try Fixtures.transcriptMessages() where entry.direction == "client" {
            if entry.message["id"] == nil, entry.message["msg"] == "method" {
                #expect(throws: DDPMessageError("Malformed method invocation")) { try ClientMessage.decode(entry.message) }
                continue
            }
            let message = try #require(try ClientMessage.decode(entry.message))
            decoded += 1
            if case .method(let id, _, let params, _) = message {
                #expect(id.hasPrefix("m"))
                #expect(params == (entry.message["params"]?.arrayValue ?? []))
            }
        }
        #expect(decoded > 40)
    }

    @Test func decodingIsTolerantAndPrecise() throws {
        #expect(try ServerMessage.decode(["server_id": "0"]) == nil)
        #expect(try ServerMessage.decode(["msg": "ready", "subs": ["a"], "extra": 1]) == .ready(subs: ["a"]))
        #expect(try ServerMessage.decode(["msg": "added", "collection": "c", "id": "1"]) == .added(collection: "c", id: "1", fields: [:]))
        #expect(try ServerMessage.decode(["msg": "result", "id": "1"]) == .result(id: "1", outcome: .success(nil)))
        #expect(throws: DDPMessageError("'added' message needs a string 'collection'")) {
            try ServerMessage.decode(["msg": "added", "id": "1"])
        }
        #expect(throws: DDPMessageError("unknown message type 'bogus'")) { try ServerMessage.decode(["msg": "bogus"]) }
        #expect(throws: DDPMessageError("a DDP message must be a JSON object")) { try ServerMessage.decode([1]) }
        #expect(throws: DDPMessageError("Malformed subscription")) { try ClientMessage.decode(["msg": "sub", "id": 1, "name": "x"]) }
        #expect(throws: DDPMessageError("Bad request")) { try ClientMessage.decode(["msg": "dance"]) }
    }

    @Test func errorsCarryStringOrNumericCodes() throws {
        let numeric = DDPError(ejson: [
            "error": 404, "reason": "Method 'x' not found", "message": "Method 'x' not found [404]", "errorType": "Meteor.Error"
        ])
        #expect(numeric.error == .number(404))
        #expect(numeric.reason == "Method 'x' not found")
        let named = DDPError(ejson: ["error": "too-many-requests", "reason": "slow down", "details": ["timeToReset": 900]])
        #expect(named.error == .string("too-many-requests"))
        #expect(named.details?["timeToReset"] == 900)
        #expect(DDPError.meteor(403, "Incorrect password").message == "Incorrect password [403]")
        #expect(DDPError(ejson: "weird").error == .string("weird"), "a malformed error still becomes an error")
    }

    /// Meteor answers a method it does not have with error 404 and a reason naming it (the
    /// transcript 08-method-errors); the reason is all that tells it from a method's own 404.
    @Test func anUnknownMethodIsRecognisedByTheNameCalled() {
        let answer = DDPError(ejson: [
            "isClientSafe": true, "error": 404, "reason": "Method 'no-such-method' not found",
            "message": "Method 'no-such-method' not found [404]", "errorType": "Meteor.Error"
        ])
        #expect(answer.isMethodNotFound("no-such-method"))
        #expect(answer == DDPError.methodNotFound("no-such-method"))
        #expect(!answer.isMethodNotFound("other"), "a 404 naming another method is that method's failure")
        #expect(!DDPError.meteor(404, "No such task").isMethodNotFound("no-such-method"), "a method's own 404")
        #expect(!DDPError.meteor("404", "Method 'no-such-method' not found").isMethodNotFound("no-such-method"))
    }

    @Test func clientMessagesEncodeAsMeteorSendsThem() {
        #expect(
            String(decoding: ClientMessage.connect(version: "1", support: ["1", "pre2", "pre1"]).encode(), as: UTF8.self)
                == #"{"msg":"connect","version":"1","support":["1","pre2","pre1"]}"#)
        #expect(
            String(decoding: ClientMessage.method(id: "m1", method: "echo", params: [1], randomSeed: "s").encode(), as: UTF8.self)
                == #"{"msg":"method","id":"m1","method":"echo","params":[1],"randomSeed":"s"}"#)
    }
}
