import DDP

extension UpstreamFailure {
    /// As `/readyz` and 503 answers carry it in `details.cause`: `code`, `message`, `hint` (when
    /// there is one) and `status` (the HTTP status of an upgrade answered but not accepted).
    var ejson: EJSON {
        var o: EJSONObject = ["code": .string(code.description), "message": .string(message)]
        if let hint { o["hint"] = .string(hint) }
        if let httpStatus { o["status"] = .int(httpStatus) }
        return .object(o)
    }

    /// `details` of a 503 for an unreachable upstream: the connection's state, and the cause.
    static func details(_ connection: ConnectionState, _ failure: UpstreamFailure?) -> EJSON {
        var o: EJSONObject = ["upstream": connection.ejson]
        if let failure { o["cause"] = failure.ejson }
        return .object(o)
    }
}
