/// A Meteor error as it travels in `result`, `nosub` and method failures:
/// `{"error": string | number, "reason", "message", "details", "errorType"}`.
public struct DDPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Meteor's `error` field: a string code (`"not-authorized"`) or a number (`403`).
    public enum Code: Sendable, Hashable, CustomStringConvertible {
        case string(String)
        case number(Int)

        public var description: String {
            switch self {
            case .string(let s): s
            case .number(let n): String(n)
            }
        }

        var ejson: EJSON {
            switch self {
            case .string(let s): .string(s)
            case .number(let n): .int(n)
            }
        }
    }

    public var error: Code
    public var reason: String?
    public var message: String?
    public var details: EJSON?
    public var errorType: String?

    public init(error: Code, reason: String? = nil, message: String? = nil, details: EJSON? = nil, errorType: String? = "Meteor.Error") {
        self.error = error
        self.reason = reason
        self.message = message ?? reason.map { "\($0) [\(error)]" } ?? "[\(error)]"
        self.details = details
        self.errorType = errorType
    }

    public static func meteor(_ code: Int, _ reason: String, details: EJSON? = nil) -> DDPError {
        DDPError(error: .number(code), reason: reason, details: details)
    }

    public static func meteor(_ code: String, _ reason: String, details: EJSON? = nil) -> DDPError {
        DDPError(error: .string(code), reason: reason, details: details)
    }

    /// The server's answer to a call of a method it does not have, as Meteor's DDP server
    /// (`livedata_server.js`) sends it: `Meteor.Error(404, "Method '<name>' not found")`.
    public static func methodNotFound(_ method: String) -> DDPError { .meteor(404, "Method '\(method)' not found") }

    /// Whether this is the server's answer to a call of `method` because it has no such method.
    ///
    /// The wire gives nothing better than the reason text: Meteor answers an unknown method
    /// with error 404 and the reason ``methodNotFound(_:)`` writes, which a method could also
    /// throw itself, and no other field tells them apart. So this is the one place that reads
    /// it, and it takes the name called: a 404 naming another method (one the method called
    /// in turn) is that method's failure.
    public func isMethodNotFound(_ method: String) -> Bool {
        error == .number(404) && reason == "Method '\(method)' not found"
    }

    /// Reads an error object; a malformed one still yields an error (never crashes).
    public init(ejson: EJSON) {
        let object = ejson.objectValue ?? [:]
        switch object["error"] {
        case .string(let s)?: error = .string(s)
        case .number(let n)? where n.rounded() == n && abs(n) < 1e15: error = .number(Int(n))
        case .number(let n)?: error = .string(EJSON.number(n).description)
        default: error = .string(ejson.stringValue ?? "unknown-error")
        }
        reason = object["reason"]?.stringValue
        message = object["message"]?.stringValue
        details = object["details"]
        errorType = object["errorType"]?.stringValue
    }

    public var ejson: EJSON {
        var object: EJSONObject = ["isClientSafe": true, "error": error.ejson]
        if let reason { object["reason"] = .string(reason) }
        if let message { object["message"] = .string(message) }
        if let details { object["details"] = details }
        if let errorType { object["errorType"] = .string(errorType) }
        return .object(object)
    }

    public var description: String { message ?? reason.map { "\($0) [\(error)]" } ?? "[\(error)]" }
}
