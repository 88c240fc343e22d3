public import DDP
public import DDPClient
import HashTreeCollections
public import Logging
public import NIOCore
import Timing

/// `ddp-bridge check`: connects once to the upstream, negotiates DDP, then tries the login and
/// the subscription it is given, each step within its deadline. It reports one line per step
/// (``Line``): `ok` and what it found, or, for the first step that fails, its cause and the fix
/// (the classification the bridge uses, ``DDP/UpstreamFailure``), and stops there.
public struct UpstreamCheck: Sendable {
    /// What to check.
    public struct Options: Sendable {
        /// `ws://host:port/websocket` or `wss://…`.
        public var url: String
        public var tls: DDPClientOptions.TLS
        public var compression: Bool
        public var maxMessageSize: Int
        /// Log in with this user (a name, or an email address when it has an `@`) and password.
        public var username: String?
        public var password: String?
        /// Subscribe to this publication with these parameters, and wait until it is ready.
        public var publication: String?
        public var params: [EJSON]
        /// Each step's deadline.
        public var timeout: Duration

        public init(
            url: String, tls: DDPClientOptions.TLS = .init(), compression: Bool = false, maxMessageSize: Int = 16 << 20,
            username: String? = nil, password: String? = nil, publication: String? = nil, params: [EJSON] = [], timeout: Duration = .seconds(10)
        ) {
            self.url = url
            self.tls = tls
            self.compression = compression
            self.maxMessageSize = maxMessageSize
            self.username = username
            self.password = password
            self.publication = publication
            self.params = params
            self.timeout = timeout
        }
    }

    /// The outcome of one step.
    public struct Line: Sendable, Equatable, CustomStringConvertible {
        public let ok: Bool
        /// What was found, or what failed and why.
        public let text: String
        /// What to change, for a step that failed (when there is something to say).
        public let fix: String?

        /// As printed: `ok  connected to …`, or `FAIL …` and an indented `fix: …` line.
        public var description: String {
            ok ? "ok  \(text)" : "FAIL \(text)" + (fix.map { "\n     fix: \($0)" } ?? "")
        }
    }

    public let options: Options

    public init(_ options: Options) { self.options = options }

    /// Runs the steps, reporting each line as it is known; `true` when every step succeeded.
    public func run(logger: Logger, eventLoop: (any EventLoop)? = nil, report: @Sendable (Line) -> Void) async -> Bool {
        var clientOptions = DDPClientOptions(
            url: options.url, tls: options.tls, compression: options.compression, maxMessageSize: options.maxMessageSize)
        // One attempt: its TCP, TLS, upgrade and DDP handshake within the step's deadline.
        clientOptions.protocolConfiguration.connectTimeout = options.timeout
        let outcome = OneShot<Result<String, UpstreamFailure>>()
        let client = DDPClient(
            options: clientOptions, logger: logger,
            events: ClosureEventSink { event in
                guard case .stateChanged(let state) = event else { return }
                switch state {
                case .connected(_, let version): outcome.resolve(.success(version))
                case .reconnecting(_, _, let cause): outcome.resolve(.failure(cause ?? UpstreamFailure(.other("no cause given"), url: options.url)))
                case .closed(let reason): outcome.resolve(.failure(UpstreamFailure(.other(reason), url: options.url)))
                case .idle, .connecting: break
                }
            },
            eventLoop: eventLoop)
        // The attempt has deadlines of its own; this one only makes sure the wait ends.
        let backstop = clientOptions.clock.schedule(after: options.timeout + .seconds(2), on: client.eventLoop) {
            outcome.resolve(.failure(UpstreamFailure(.timedOut(.handshake, after: options.timeout), url: options.url)))
        }
        await client.start()
        let connected = await outcome.value
        backstop.cancel()
        var loggedIn = false
        let succeeded = await steps(client, connected: connected, loggedIn: &loggedIn, report: report)
        // A login by the check leaves no resume token behind in the app.
        if loggedIn { _ = try? await client.logout(timeout: .seconds(2)) }
        await client.close(reason: "check finished")
        return succeeded
    }

    private func steps(
        _ client: DDPClient, connected: Result<String, UpstreamFailure>, loggedIn: inout Bool, report: @Sendable (Line) -> Void
    ) async -> Bool {
        switch connected {
        case .success(let version):
            report(Line(ok: true, text: "connected to \(options.url) (DDP \(version))", fix: nil))
        case .failure(let failure):
            report(Line(ok: false, text: "cannot connect to \(options.url): \(failure.message)", fix: failure.hint))
            return false
        }
        if let username = options.username {
            let user: LoginRequest.User = username.contains("@") ? .email(username) : .username(username)
            do {
                let login = try await client.login(.password(user: user, password: options.password ?? ""), timeout: options.timeout)
                loggedIn = true
                report(Line(ok: true, text: "logged in as \(username) (user id \(login.userId))", fix: nil))
            } catch {
                report(
                    Line(
                        ok: false, text: "cannot log in as \(username): \(Self.describe(error, timeout: options.timeout))", fix: Self.loginFix(error))
                )
                return false
            }
        }
        guard let publication = options.publication else { return true }
        let before = await client.withCache { $0 }
        do {
            try await client.subscribe(publication, params: options.params, timeout: options.timeout)
        } catch {
            report(
                Line(
                    ok: false, text: "cannot subscribe to \(publication): \(Self.describe(error, timeout: options.timeout))",
                    fix: Self.subscribeFix(error, loggedIn: loggedIn)))
            return false
        }
        let loaded = await client.withCache { Self.loaded(from: before, to: $0) }
        let total = loaded.reduce(0) { $0 + $1.documents }
        let names = loaded.map(\.name).joined(separator: ", ")
        let collections = loaded.count == 1 ? "1 collection" : "\(loaded.count) collections"
        report(
            Line(
                ok: true,
                text: "subscribed to \(publication): \(total) document\(total == 1 ? "" : "s") in \(collections)"
                    + (loaded.isEmpty ? "" : " (\(names))"), fix: nil))
        return true
    }

    /// Documents of one collection that a subscription brought.
    struct Loaded: Sendable, Equatable {
        let name: String
        let documents: Int
    }

    /// The documents the subscription brought: those in `after` and not in `before`, by collection.
    static func loaded(from before: DocumentCache, to after: DocumentCache) -> [Loaded] {
        after.collections.compactMap { name, collection -> Loaded? in
            let old = before.collections[name]?.documents
            let count = collection.documents.keys.reduce(0) { $0 + (old?[$1] == nil ? 1 : 0) }
            return count > 0 ? Loaded(name: name, documents: count) : nil
        }.sorted { $0.name < $1.name }
    }

    static func describe(_ error: any Error, timeout: Duration) -> String {
        switch error {
        case let error as DDPError: "\(error)"
        case let error as DDPClientError where error.code == .timedOut: "no answer within \(UpstreamFailure.format(timeout))"
        case let error as DDPClientError: "\(error)"
        default: "\(error)"
        }
    }

    static func loginFix(_ error: any Error) -> String? {
        guard let error = error as? DDPError else {
            return (error as? DDPClientError)?.code == .timedOut ? "the app did not answer its login method in time: is it overloaded?" : nil
        }
        switch error.error {
        case .number(404): return "the app has no password login: add the accounts-password package, or check without --username"
        case .number(403), .number(400): return "check --username and --password: the user must exist in the app, with this password"
        case .string("too-many-requests"): return "Meteor's login rate limit: wait, then try again"
        default: return nil
        }
    }

    static func subscribeFix(_ error: any Error, loggedIn: Bool) -> String? {
        if (error as? DDPClientError)?.code == .timedOut {
            return "the publication did not get ready in time: it must call this.ready() or return cursors"
        }
        guard let error = error as? DDPError else { return nil }
        switch error.error {
        case .number(404): return "no publication has this name: check Meteor.publish in the app"
        case .string("not-authorized"), .number(401), .number(403):
            return loggedIn ? "the user may not read this publication" : "the publication may need a login: add --username and --password"
        default: return "the publication threw this error: see the app's log"
        }
    }
}
