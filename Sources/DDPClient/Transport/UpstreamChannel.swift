import DDP
import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Timing

/// The WebSocket client channel of one upstream connection attempt: TCP, TLS and the HTTP
/// upgrade under one deadline, then ``UpstreamFrameHandler`` on the connection's event loop.
/// swift-websocket's client has no deadline for the upgrade (an upstream that accepts TCP and
/// never answers would hold the attempt, and its socket, forever), so the bridge sets the
/// pipeline up itself and closes the channel when the deadline passes or when its owner gives
/// up (``ChannelHandle/close()``). An attempt is a future (``connect(on:logger:)``), and no
/// task waits for it.
///
/// The channel is made on the client's loop, which is the client's executor: the handler hands
/// each message to the client, and the client writes each message to the channel, with no hop.
struct UpstreamChannel: Sendable {
    enum Upgrade: Sendable {
        /// Upgraded; completed when the connection ends, with the violation that ended it, if any.
        case websocket(EventLoopFuture<UpstreamTransportError?>)
        /// Answered with another status than 101: completed with the answer's head.
        case declined(EventLoopFuture<HTTPResponseHead>)
    }

    let target: UpstreamAddress
    let headers: HTTPFields
    let compression: Bool
    let maxMessageSize: Int
    let sslContext: NIOSSLContext?
    let handshakeTimeout: Duration
    let clock: BridgeClock
    let handle: ChannelHandle
    let client: DDPClient
    /// How the host's name becomes addresses; `nil`: NIO's (getaddrinfo). Tests give names
    /// several addresses with it.
    var resolver: (any Resolver & Sendable)? = nil

    /// TLS and the upgrade on a new channel, under the attempt's deadline (which fails `result`
    /// with the stage it cut); the upgrade's outcome.
    private func setUp(
        channel: any Channel, connected: AttemptConnected, result: EventLoopPromise<UpstreamTransportError?>, logger: Logger
    ) throws -> EventLoopFuture<Upgrade> {
        handle.attach(channel)
        let handle = self.handle
        let deadline = clock.schedule(after: handshakeTimeout, on: channel.eventLoop) {
            logger.debug("the upstream handshake timed out; closing the attempt", metadata: ["stage": "\(handle.stage)"])
            result.fail(UpstreamTransportError.timedOut(handle.stage))
            channel.close(promise: nil)
        }
        if let sslContext {
            let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: target.isIPAddress ? nil : target.host)
            try channel.pipeline.syncOperations.addHandler(tls, position: .first)
        }
        // After TLS, before HTTP: it sees the connection open and the TLS handshake finish.
        try channel.pipeline.syncOperations.addHandler(
            AttemptStageObserver(handle: handle, connected: connected, secure: sslContext != nil), name: AttemptStageObserver.name)
        let upgrade = try configureUpgrade(channel: channel)
        upgrade.whenComplete { outcome in
            deadline.cancel()
            if case .success(.websocket) = outcome { handle.reached(.handshake) }
            channel.pipeline.syncOperations.removeHandler(name: AttemptStageObserver.name, promise: nil)
        }
        return upgrade
    }

    private func configureUpgrade(channel: any Channel) throws -> EventLoopFuture<Upgrade> {
        let (client, maxSize, offered) = (self.client, maxMessageSize, compression)
        let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
            // NIO's precondition: a frame limit fits in 32 bits.
            maxFrameSize: min(max(maxSize, 1), Int(UInt32.max)),
            // Protocol errors (an oversized frame) reach the frame handler, which knows the cause.
            enableAutomaticErrorHandling: false,
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    // The client's executor is this loop: the handler calls it here, with no hop.
                    guard channel.eventLoop === client.eventLoop else {
                        throw UpstreamTransportError.protocolViolation("the connection is not on the client's event loop")
                    }
                    var answer = HTTPFields()
                    for header in head.headers {
                        if let name = HTTPField.Name(header.name) { answer.append(HTTPField(name: name, value: header.value)) }
                    }
                    let reader = try UpstreamFrameReader(maxSize: maxSize, deflate: DeflateAgreement.agreed(in: answer, offered: offered))
                    let ended = channel.eventLoop.makePromise(of: UpstreamTransportError?.self)
                    let handler = UpstreamFrameHandler(reader: reader, ended: ended) { message in
                        client.assumeIsolated { $0.transportReceived(message, on: channel) }
                    }
                    do {
                        try channel.pipeline.syncOperations.addHandler(handler)
                    } catch {
                        ended.fail(error)
                        throw error
                    }
                    return .websocket(ended.futureResult)
                }
            }
        )
        var request = HTTPHeaders()
        request.add(name: "Host", value: target.hostHeader)
        request.add(name: "Origin", value: target.origin)
        for field in headers { request.add(name: field.name.rawName, value: field.value) }
        if compression { request.add(name: "Sec-WebSocket-Extensions", value: DeflateAgreement.offer) }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.path, headers: request)
        let upgradeConfiguration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
            upgradeRequestHead: head,
            upgraders: [upgrader],
            // The answer's head is handed on after this completes: a handler at the end takes it.
            notUpgradingCompletionHandler: { channel in
                channel.eventLoop.makeCompletedFuture {
                    let answer = channel.eventLoop.makePromise(of: HTTPResponseHead.self)
                    channel.closeFuture.whenComplete { _ in answer.fail(ChannelError.ioOnClosedChannel) }
                    try channel.pipeline.syncOperations.addHandler(DeclinedUpgradeAnswer(answer: answer))
                    return .declined(answer.futureResult)
                }
            }
        )
        var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: upgradeConfiguration)
        pipeline.leftOverBytesStrategy = .forwardBytes
        return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
    }

    /// At most this many reads of at most ``readSize`` bytes from the upstream per turn of the loop.
    static let readsPerTurn: UInt = 1
    static let readSize = 16 * 1024
    /// The first read's size, NIO's default: the channel keeps its read buffer between reads, so
    /// an idle connection holds this (starting at ``readSize`` cost every session 14 KiB more);
    /// the buffer grows to ``readSize`` as reads fill it.
    static let firstReadSize = 2 * 1024

    /// Connects on `eventLoop` (the client's). The future completes when the attempt ends: with
    /// the violation that ended the WebSocket, if any; failed if it never opened, with what
    /// stopped it (refused, an upgrade answered with another status, the deadline and the stage
    /// it cut, the upstream closing), for ``DDP/UpstreamFailure/classify(_:stage:address:timeout:url:)``.
    /// No task waits for it.
    func connect(on eventLoop: any EventLoop, logger: Logger) -> EventLoopFuture<UpstreamTransportError?> {
        let result = eventLoop.makePromise(of: UpstreamTransportError?.self)
        var bootstrap = ClientBootstrap(group: eventLoop)
        if let resolver { bootstrap = bootstrap.resolver(resolver) }
        bootstrap
            // The attempt's deadline is the handshake's (in `setUp`); this bounds the name lookup too.
            // No half-closure: the upstream's FIN closes the channel, during the upgrade too (with
            // it, an upstream that closed while stopping held the attempt until its deadline).
            .connectTimeout(TimeAmount(handshakeTimeout))
            // Fair to the loop's other connections: one read of at most 16 KiB per turn of the
            // loop, so a subscription loading thousands of documents holds its loop a couple of
            // milliseconds at a time, not tens (NIO's defaults, 4 reads of up to 64 KiB, held it
            // ~30 ms per turn: docs/ARCHITECTURE.md, "Work whose size depends on data").
            .channelOption(.maxMessagesPerRead, value: Self.readsPerTurn)
            .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 1024, initial: Self.firstReadSize, maximum: Self.readSize))
            .channelInitializer { [client] channel in
                // A name with several addresses (`localhost`: ::1 and 127.0.0.1) makes a channel
                // per address tried (NIO's Happy Eyeballs): only the one that connects speaks for
                // the attempt. One that never connected ends with the connection's error
                // (refused, not resolved), which the bootstrap reports once every address failed;
                // its own end (closed, its upgrade never answered) is not the attempt's.
                let connected = AttemptConnected()
                // If the channel goes before the upgrade has said anything (an upgrade handler
                // that never completes), the attempt still ends. Completing a promise again is a
                // no-op.
                channel.closeFuture.whenComplete { _ in
                    if connected.value { result.fail(ChannelError.ioOnClosedChannel) }
                }
                return channel.eventLoop.makeCompletedFuture {
                    try setUp(channel: channel, connected: connected, result: result, logger: logger).whenComplete { outcome in
                        switch outcome {
                        case .success(.websocket(let ended)):
                            // Only once the upgrade has finished does NIO's upgrade handler let
                            // writes through (the client's first write is `connect`); frames that
                            // came with the answer are handed on after this, to the frame handler
                            // already in place.
                            client.assumeIsolated { $0.transportOpened(channel) }
                            ended.cascade(to: result)
                        case .success(.declined(let answer)):
                            // Any status but 101 ends the attempt at once, naming it.
                            answer.whenComplete { head in
                                result.fail(
                                    (try? head.get()).map {
                                        UpstreamTransportError.upgradeRefused(
                                            status: Int($0.status.code), contentType: $0.headers.first(name: "content-type"))
                                    } ?? ChannelError.ioOnClosedChannel)
                            }
                        case .failure(let error): if connected.value { result.fail(error) }
                        }
                    }
                }
            }
            .connect(host: target.host, port: target.port)
            .whenFailure { result.fail($0) }
        return result.futureResult
    }
}

/// Whether one channel of an attempt connected (set on its loop, by ``AttemptStageObserver``).
final class AttemptConnected: Sendable {
    private let connected = NIOLockedValueBox(false)
    var value: Bool { connected.withLockedValue { $0 } }
    func set() { connected.withLockedValue { $0 = true } }
}

/// The channel of the current attempt, so its owner can close it from outside the
/// connection's task (a deadline, a close, a cancelled run), and how far the attempt got (the
/// stage a failure is classified at).
final class ChannelHandle: Sendable {
    private struct State {
        var channel: (any Channel)?
        var closed = false
        var stage = UpstreamFailure.Stage.tcp
    }
    private let state = NIOLockedValueBox(State())

    /// How far the attempt got: TCP until it connects, then TLS (`wss://`), the upgrade, the DDP handshake.
    var stage: UpstreamFailure.Stage { state.withLockedValue { $0.stage } }

    /// The attempt reached `stage` (a later one than where it was).
    func reached(_ stage: UpstreamFailure.Stage) {
        state.withLockedValue { state in
            if Self.order(stage) > Self.order(state.stage) { state.stage = stage }
        }
    }

    private static func order(_ stage: UpstreamFailure.Stage) -> Int {
        switch stage {
        case .tcp: 0
        case .tls: 1
        case .upgrade: 2
        case .handshake: 3
        case .open: 4
        }
    }

    func attach(_ channel: any Channel) {
        let closeNow = state.withLockedValue { state -> Bool in
            state.channel = channel
            return state.closed
        }
        if closeNow { channel.close(promise: nil) }
    }

    /// Closes the channel: with the close handshake if the WebSocket is open (``UpstreamFrameHandler``).
    func close() {
        let channel = state.withLockedValue { state -> (any Channel)? in
            state.closed = true
            return state.channel
        }
        channel?.close(promise: nil)
    }
}

enum UpstreamTransportError: Error, Equatable, CustomStringConvertible {
    /// The upgrade was answered with another status than 101.
    case upgradeRefused(status: Int, contentType: String?)
    /// The attempt's deadline passed at this stage.
    case timedOut(UpstreamFailure.Stage)
    case invalidURL(String)
    /// A message (or one frame of it) over the size limit, in bytes.
    case messageTooLarge(limit: Int)
    /// A text message that is not UTF-8 (RFC 6455 §8.1).
    case invalidText
    case protocolViolation(String)

    var description: String {
        switch self {
        case .upgradeRefused(let status, _): "the upstream answered the WebSocket upgrade with HTTP \(status)"
        case .timedOut(let stage): "the attempt timed out (\(stage))"
        case .invalidURL(let url): "not a ws:// or wss:// URL: \(url)"
        case .messageTooLarge(let limit): "the upstream sent a message over the limit of \(limit) bytes"
        case .invalidText: "the upstream broke the WebSocket protocol: a text message that is not UTF-8"
        case .protocolViolation(let what): "the upstream broke the WebSocket protocol: \(what)"
        }
    }

    /// The close frame's code for a violation (RFC 6455 §7.4.1): 1009 for a message over the
    /// limit, 1007 for text that is not UTF-8, 1002 for the rest.
    var closeCode: WebSocketErrorCode {
        switch self {
        case .messageTooLarge: .messageTooLarge
        case .invalidText: .dataInconsistentWithMessage
        case .upgradeRefused, .timedOut, .invalidURL, .protocolViolation: .protocolError
        }
    }
}

/// Host, port and path of a `ws://` / `wss://` URL.
struct UpstreamAddress: Sendable, Equatable {
    let secure: Bool
    let host: String
    let port: Int
    let path: String

    init(_ url: String) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else { throw UpstreamTransportError.invalidURL(url) }
        switch scheme {
        case "ws", "http": secure = false
        case "wss", "https": secure = true
        default: throw UpstreamTransportError.invalidURL(url)
        }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let port = components.port ?? (secure ? 443 : 80)
        guard (1...65_535).contains(port) else { throw UpstreamTransportError.invalidURL(url) }
        self.port = port
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        self.path = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? name : "\(name):\(port)"
    }

    var origin: String { (secure ? "https://" : "http://") + (host.contains(":") ? "[\(host)]" : host) }

    var isIPAddress: Bool { host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." } }
}
