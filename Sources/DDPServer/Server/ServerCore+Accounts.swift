import DDP
import Foundation

/// accounts-password and resume tokens, as Meteor's accounts packages answer them.
extension ServerCore {
    /// Creates a user from the server side (seeding); returns its id.
    @discardableResult
    public func createUser(username: String?, email: String?, password: String, profile: EJSONObject = [:]) throws -> String {
        try addUser(username: username, email: email, digest: SHA256Digest.hex(password), profile: profile)
    }

    /// Forgets every login token of a user (as "log out other clients" does), so resumes fail.
    public func revokeLoginTokens(userId: String) throws {
        try update("users", ["_id": .string(userId)], ["$set": ["services.resume.loginTokens": []]])
    }

    func login(_ connection: Int, _ params: [EJSON]) -> Result<EJSON?, DDPError> {
        if let limited = rateLimit(connection) { return .failure(limited) }
        guard case .object(let request)? = params.first else {
            return .failure(.meteor(400, "Match failed"))
        }
        if let resume = request["resume"] {
            guard case .string(let token) = resume, let user = userWithToken(token) else {
                return .failure(.meteor(403, "You've been logged out by the server. Please log in again."))
            }
            return .success(loggedIn(connection, user: user, token: token, type: "resume"))
        }
        guard let selector = request["user"]?.objectValue, let password = request["password"] else {
            return .failure(.meteor(400, "Unrecognized options for login request"))
        }
        let user: EJSONObject?
        if let name = selector["username"]?.stringValue {
            user = try? find("users", ["username": .string(name)]).first
        } else if let address = selector["email"]?.stringValue {
            user = try? find("users", ["emails.address": .string(address)]).first
        } else if let id = selector["id"]?.stringValue {
            user = try? find("users", ["_id": .string(id)]).first
        } else {
            return .failure(.meteor(400, "Match failed"))
        }
        guard let user else { return .failure(.meteor(403, "User not found")) }
        let digest: String?
        switch password {
        case .string(let plain): digest = SHA256Digest.hex(plain)
        case .object(let o) where o["algorithm"]?.stringValue == "sha-256": digest = o["digest"]?.stringValue?.lowercased()
        default: digest = nil
        }
        guard let digest, digest == user["services"]?["password"]?["sha256"]?.stringValue else {
            return .failure(.meteor(403, "Incorrect password"))
        }
        return .success(issueToken(connection, user: user))
    }

    func logout(_ connection: Int, _ params: [EJSON]) -> Result<EJSON?, DDPError> {
        guard let current = connections[connection] else { return .success(nil) }
        if let userId = current.userId, let token = current.loginToken {
            _ = try? update(
                "users", ["_id": .string(userId)],
                ["$pull": ["services.resume.loginTokens": ["hashedToken": .string(Self.hash(token))]]], fenced: true)
        }
        connections[connection]!.loginToken = nil
        setUser(connection, nil)
        return .success(nil)
    }

    func createUser(_ connection: Int, _ params: [EJSON]) -> Result<EJSON?, DDPError> {
        if let limited = rateLimit(connection) { return .failure(limited) }
        guard case .object(let options)? = params.first else { return .failure(.meteor(400, "Match failed")) }
        let username = options["username"]?.stringValue
        let email = options["email"]?.stringValue
        let digest: String
        switch options["password"] {
        case .string(let plain)?: digest = SHA256Digest.hex(plain)
        case .object(let o)? where o["algorithm"]?.stringValue == "sha-256" && o["digest"]?.stringValue != nil:
            digest = o["digest"]!.stringValue!.lowercased()
        default: return .failure(.meteor(400, "Password may not be empty"))
        }
        do {
            let id = try addUser(username: username, email: email, digest: digest, profile: options["profile"]?.objectValue ?? [:], fenced: true)
            guard let user = try find("users", ["_id": .string(id)]).first else { return .failure(.meteor(500, "Internal server error")) }
            return .success(issueToken(connection, user: user))
        } catch let error as DDPError {
            return .failure(error)
        } catch {
            return .failure(.meteor(500, "Internal server error"))
        }
    }

    private func addUser(username: String?, email: String?, digest: String, profile: EJSONObject, fenced: Bool = false) throws -> String {
        guard username != nil || email != nil else { throw DDPError.meteor(400, "Need to set a username or email") }
        if let username, !(try find("users", ["username": .string(username)]).isEmpty) {
            throw DDPError.meteor(403, "Username already exists.")
        }
        if let email, !(try find("users", ["emails.address": .string(email)]).isEmpty) {
            throw DDPError.meteor(403, "Email already exists.")
        }
        var user: EJSONObject = ["_id": .string(MeteorRandom.id()), "createdAt": .date(Self.nowMilliseconds())]
        if let username { user["username"] = .string(username) }
        if let email { user["emails"] = [["address": .string(email), "verified": false]] }
        user["profile"] = .object(profile)
        user["services"] = ["password": ["sha256": .string(digest)], "resume": ["loginTokens": []]]
        return try insert("users", user, randomSeed: nil, fenced: fenced)
    }

    /// A new resume token for the user, stored hashed; the connection becomes that user.
    private func issueToken(_ connection: Int, user: EJSONObject) -> EJSON {
        let token = MeteorRandom.secret()
        let userId = user["_id"]?.stringValue ?? ""
        let when = Self.nowMilliseconds()
        _ = try? update(
            "users", ["_id": .string(userId)],
            ["$push": ["services.resume.loginTokens": ["hashedToken": .string(Self.hash(token)), "when": .date(when)]]], fenced: true)
        return loggedIn(connection, user: user, token: token, type: "password")
    }

    private func loggedIn(_ connection: Int, user: EJSONObject, token: String, type: String) -> EJSON {
        let userId = user["_id"]?.stringValue ?? ""
        let issued = tokenIssued(user, token) ?? Self.nowMilliseconds()
        connections[connection]?.loginToken = token
        setUser(connection, userId)
        return [
            "id": .string(userId), "token": .string(token),
            "tokenExpires": .date(issued + configuration.tokenLifetime.seconds * 1000), "type": .string(type)
        ]
    }

    private func tokenIssued(_ user: EJSONObject, _ token: String) -> Double? {
        let hashed = Self.hash(token)
        for entry in user["services"]?["resume"]?["loginTokens"]?.arrayValue ?? [] where entry["hashedToken"]?.stringValue == hashed {
            if case .date(let when)? = entry["when"] { return when }
        }
        return nil
    }

    private func userWithToken(_ token: String) -> EJSONObject? {
        let hashed = Self.hash(token)
        guard let user = try? find("users", ["services.resume.loginTokens.hashedToken": .string(hashed)]).first,
            let issued = tokenIssued(user, token)
        else { return nil }
        let expires = issued + configuration.tokenLifetime.seconds * 1000
        return expires > Self.nowMilliseconds() ? user : nil
    }

    /// Meteor's accounts rule: a few login attempts per connection per interval.
    private func rateLimit(_ connection: Int) -> DDPError? {
        guard let limit = configuration.loginRateLimit, connections[connection] != nil else { return nil }
        let now = ContinuousClock.now
        var calls = connections[connection]!.rateLimited.filter { now - $0 < limit.interval }
        defer { connections[connection]!.rateLimited = calls }
        guard calls.count < limit.calls else {
            let reset = limit.interval - (now - calls[0])
            let ms = Int((reset.seconds * 1000).rounded(.up))
            return DDPError.meteor(
                "too-many-requests",
                "Error, too many requests. Please slow down. You must wait \(Int((Double(ms) / 1000).rounded(.up))) seconds before trying again.",
                details: ["timeToReset": .int(ms)])
        }
        calls.append(now)
        return nil
    }

    /// Now, in whole milliseconds since 1970 (as JavaScript dates are).
    static func nowMilliseconds() -> Double { (Date().timeIntervalSince1970 * 1000).rounded() }

    /// Login tokens are stored hashed (SHA-256, base64), as Meteor stores them.
    static func hash(_ token: String) -> String {
        Data(SHA256Digest.hash(Array(token.utf8))).base64EncodedString()
    }
}
