public import BridgeStore
import Foundation

/// A `--session-store postgres://…` setting read into a location.
extension PostgresLocation {
    /// `nil` with the reason when the URL is not a usable `postgres://` location.
    public static func parse(_ text: String) -> Result<PostgresLocation, Settings.Invalid> {
        func bad(_ why: String) -> Result<PostgresLocation, Settings.Invalid> { .failure(Settings.Invalid(description: why)) }
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? "") else {
            return bad("must be a postgres://user:password@host:port/database URL")
        }
        guard let host = url.host, !host.isEmpty else { return bad("needs a host") }
        guard let username = url.user, !username.isEmpty else { return bad("needs a user name (postgres://user@host/database)") }
        let port = url.port ?? 5432
        guard (1...65_535).contains(port) else { return bad("has a port out of range") }
        let path = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        var mode = "prefer"
        for item in url.queryItems ?? [] {
            guard item.name == "sslmode" else { return bad("takes only the sslmode parameter, not '\(item.name)'") }
            guard let value = item.value, ["disable", "prefer", "require"].contains(value) else {
                return bad("sslmode must be disable, prefer or require")
            }
            mode = value
        }
        return .success(
            PostgresLocation(
                host: host, port: port, username: username.removingPercentEncoding ?? username,
                password: url.password.map { $0.removingPercentEncoding ?? $0 }, database: path.isEmpty ? nil : path, sslMode: mode))
    }
}
