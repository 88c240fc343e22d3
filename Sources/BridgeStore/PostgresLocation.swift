import NIOSSL
import PostgresNIO

/// Where the PostgreSQL store is, from a `postgres://` URL, checked when the settings are read
/// (`parse(_:)` is in Bridge: it answers in the settings' error type).
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String?
    public var sslMode: String

    package init(host: String, port: Int, username: String, password: String?, database: String?, sslMode: String) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.sslMode = sslMode
    }

    var tls: PostgresClient.Configuration.TLS {
        switch sslMode {
        case "disable": .disable
        case "require": .require(.makeClientConfiguration())
        default: .prefer(.makeClientConfiguration())
        }
    }

    func connectionTLS() throws -> PostgresConnection.Configuration.TLS {
        switch sslMode {
        case "disable": .disable
        case "require": .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        default: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
    }

    /// The location without its password, for logs and help.
    public var description: String { "postgres://\(username)@\(host):\(port)/\(database ?? "")?sslmode=\(sslMode)" }
}
