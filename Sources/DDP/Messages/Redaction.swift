/// Copies of DDP messages that are safe to log: the values of fields that carry credentials
/// (password digests, resume tokens, login tokens, a user's `services`) are replaced by
/// `"[redacted]"`, at any depth.
extension EJSON {
    /// Field names whose values are never logged.
    public static let secretKeys: Set<String> = [
        "password", "digest", "newPassword", "oldPassword", "srp", "resume", "token", "hashedToken",
        "loginTokens", "services", "authorization", "cookie"
    ]

    public func redactingSecrets() -> EJSON {
        switch self {
        case .object(let object):
            var out: [EJSONObject.Field] = []
            out.reserveCapacity(object.count)
            for field in object {
                let secret = EJSON.secretKeys.contains(field.key)
                out.append(EJSONObject.Field(key: field.key, value: secret ? .string("[redacted]") : field.value.redactingSecrets()))
            }
            return .object(EJSONObject(uniqueFieldsInOrder: out))
        case .array(let array):
            return .array(array.map { $0.redactingSecrets() })
        default:
            return self
        }
    }
}

extension ClientMessage {
    /// The message as JSON text with credentials redacted, for logs.
    public var loggable: String { String(decoding: EJSONWriter.encode(ejson.redactingSecrets()), as: UTF8.self) }
}

extension ServerMessage {
    /// The message as JSON text with credentials redacted, for logs.
    public var loggable: String { String(decoding: EJSONWriter.encode(ejson.redactingSecrets()), as: UTF8.self) }
}
