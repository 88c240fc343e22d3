import ArgumentParser
import DDP
import DDPClient
import Foundation
import Logging

/// What to follow on the upstream, and how to print it.
struct WatchOptions: ParsableArguments {
    @Option(name: .customLong("subscribe"), help: "A publication to subscribe to, as NAME or NAME:JSON-PARAMS (repeatable).")
    var subscriptions: [String] = []

    @Option(help: "Log in as this username before subscribing.")
    var username: String?

    @Option(help: "Password for --username (or set DDP_BRIDGE_PASSWORD).")
    var password: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "notice"

    /// Parses `NAME` or `NAME:[json params]`.
    static func parseSubscription(_ text: String) throws -> (String, [EJSON]) {
        guard let colon = text.firstIndex(of: ":") else { return (text, []) }
        let name = String(text[..<colon])
        let params = try EJSONParser.parse(String(text[text.index(after: colon)...]))
        guard case .array(let list) = params else { throw ValidationError("the params of --subscribe \(name) must be a JSON array") }
        return (name, list)
    }
}
