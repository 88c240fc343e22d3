extension DocumentQuery {
    /// The part of the configuration a query is read with: the documents it returns when it sets
    /// no `limit`, and the most it may ask for.
    struct Limits: Sendable, Equatable {
        var defaultLimit: Int
        var maxLimit: Int
    }

    /// Reads the query parameters within `limits`
    /// (``init(selector:sort:skip:limit:fields:defaultLimit:maxLimit:)``).
    init(selector: String?, sort: String?, skip: String?, limit: String?, fields: String?, limits: Limits) throws(BridgeError) {
        try self.init(
            selector: selector, sort: sort, skip: skip, limit: limit, fields: fields, defaultLimit: limits.defaultLimit,
            maxLimit: limits.maxLimit)
    }
}
