/// The parameters of Meteor's `login` and `createUser` methods (accounts-password, resume tokens).
public enum LoginRequest: Sendable, Equatable {
    public enum User: Sendable, Equatable {
        case username(String)
        case email(String)
    }

    case password(user: User, password: String)
    case resume(token: String)
    /// A payload given to `login` as is (OAuth credentials, custom login handlers).
    case raw(EJSON)

    /// The single parameter of the `login` method.
    public var parameter: EJSON {
        switch self {
        case .password(let user, let password):
            let selector: EJSON =
                switch user {
                case .username(let name): ["username": .string(name)]
                case .email(let address): ["email": .string(address)]
                }
            return ["user": selector, "password": Self.passwordDigest(password)]
        case .resume(let token):
            return ["resume": .string(token)]
        case .raw(let value):
            return value
        }
    }

    /// `{"digest": hex SHA-256, "algorithm": "sha-256"}`: the password never travels in clear.
    public static func passwordDigest(_ password: String) -> EJSON {
        ["digest": .string(SHA256Digest.hex(password)), "algorithm": "sha-256"]
    }

    /// The parameter of `createUser`.
    public static func createUser(username: String?, email: String?, password: String, profile: EJSON? = nil) -> EJSON {
        var o = EJSONObject()
        if let username { o["username"] = .string(username) }
        if let email { o["email"] = .string(email) }
        o["password"] = passwordDigest(password)
        if let profile { o["profile"] = profile }
        return .object(o)
    }
}

/// What a successful login returns: `{"id", "token", "tokenExpires"}`.
public struct LoginResult: Sendable, Equatable {
    public var userId: String
    public var token: String
    /// Milliseconds since 1970, when the token stops working.
    public var tokenExpires: Double?

    public init(userId: String, token: String, tokenExpires: Double?) {
        self.userId = userId
        self.token = token
        self.tokenExpires = tokenExpires
    }

    public init?(_ value: EJSON?) {
        guard let value, case .string(let id)? = value["id"], case .string(let token)? = value["token"] else { return nil }
        self.userId = id
        self.token = token
        if case .date(let ms)? = value["tokenExpires"] { tokenExpires = ms } else { tokenExpires = value["tokenExpires"]?.numberValue }
    }
}
