import DDP
import HTTPTypes
import Logging
import Synchronization
import Testing

@testable import Bridge

/// Lines written by a JSON log handler, kept in memory.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ bytes: [UInt8]) { lines.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
    var all: [String] { lines.withLock { $0 } }

    /// A bridge logger writing JSON lines at `level` into a new `LogLines`.
    static func logger(level: Logger.Level) -> (LogLines, Logger) {
        let lines = LogLines()
        var logger = Logger(label: "bridge") { label in JSONLogHandler(label: label, write: { lines.append($0) }) }
        logger.logLevel = level
        return (lines, logger)
    }
}

@Suite struct LoggingTests {
    /// A session logged in as alice: its bridge token and its Meteor login token.
    static func aliceSession(_ h: BridgeHarness) async throws -> (token: String, loginToken: String) {
        let (token, login) = try await h.session(#"{"username":"alice","password":"secret"}"#)
        return (token, try #require(login["loginToken"]?.stringValue))
    }

    @Test func jsonLinesCarryLevelMessageAndMetadata() throws {
        let lines = LogLines()
        var logger = Logger(label: "test") { label in JSONLogHandler(label: label, write: { lines.append($0) }) }
        logger[metadataKey: "ddp.session"] = "abc"
        logger.info("session created", metadata: ["reason": "a \"quoted\" reason"])
        let line = try #require(lines.all.first)
        #expect(line.hasSuffix("\n"))
        let object = try EJSONParser.parse(String(line.dropLast()))
        #expect(object["level"] == "info" && object["message"] == "session created" && object["label"] == "test")
        #expect(object["ddp.session"] == "abc" && object["reason"] == "a \"quoted\" reason")
    }

    /// Passwords, tokens and document contents never appear at info level or above.
    @Test func secretsAndDocumentsStayOutOfLogs() async throws {
        let (lines, logger) = LogLines.logger(level: .info)
        try await BridgeHarness.run(logger: logger) { h in
            let (token, loginToken) = try await Self.aliceSession(h)
            _ = try await h.request(.post, "/v1/subscriptions", token: token, body: #"{"name":"tasks"}"#)
            _ = try await h.request(.post, "/v1/collections/tasks", token: token, body: #"{"text":"very private note"}"#)
            _ = try await h.request(.post, "/v1/methods/crash", token: token)
            _ = try await h.request(.post, "/v1/session/login", token: token, body: #"{"username":"alice","password":"wrong-secret"}"#)
            _ = try await h.request(.get, "/v1/session", token: loginToken)
            let text = lines.all.joined()
            #expect(!text.isEmpty, "the flow does log at info level")
            for secret in ["secret", "wrong-secret", token, loginToken, "very private note", "alice inbox task"] {
                #expect(!text.contains(secret), "'\(secret)' appeared in the logs")
            }
        }
    }

    /// Trace level logs every DDP message, but never a password digest or a resume token.
    @Test func traceLogsRedactDigestsAndResumeTokens() async throws {
        let (lines, logger) = LogLines.logger(level: .trace)
        try await BridgeHarness.run(logger: logger) { h in
            let (token, loginToken) = try await Self.aliceSession(h)
            _ = try await h.request(.post, "/v1/methods/login", token: token, body: #"[{"resume":"\#(loginToken)"}]"#)
            _ = try await h.request(.post, "/v1/methods/echo", token: token, body: #"["visible at trace"]"#)
            let text = lines.all.joined()
            // The messages are there (so the check below could fail), with their secrets blanked.
            #expect(text.contains("visible at trace") && text.contains("[redacted]"))
            for secret in [SHA256Digest.hex("secret"), loginToken, token] {
                #expect(!text.contains(secret), "'\(secret)' appeared in the trace logs")
            }
        }
    }
}
