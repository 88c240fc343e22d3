import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOWebSocket
import WSClient
@_spi(WSInternal) import WSCore

/// The WebSocket client channel of one upstream connection attempt: TCP, TLS and the HTTP
/// upgrade under one deadline. `WSClient`'s own channel has no deadline for the upgrade (an
/// upstream that accepts TCP and never answers would hold the attempt, and its socket,
/// forever), so the bridge sets the pipeline up itself and closes the channel when the
/// deadline passes or when its owner gives up (``ChannelHandle/close()``).
struct UpstreamChannel: ClientConnectionChannel {
    enum Upgrade: Sendable {
        case websocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, [any WebSocketExtension])
        case declined
    }

    struct Context: WebSocketContext {
        let logger: Logger
    }

    typealias Value = EventLoopFuture<Upgrade>
    typealias Result = WebSocketCloseFrame?

    let target: UpstreamAddress
    let configuration: WebSocketClientConfiguration
    let sslContext: NIOSSLContext?
    let handshakeTimeout: Duration
    let handle: ChannelHandle
    let handler: WebSocketDataHandler<Context>

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        handle.attach(channel)
        let deadline = channel.eventLoop.scheduleDeadline(after: handshakeTimeout) {
            logger.debug("the upstream handshake timed out; closing the attempt")
            channel.close(promise: nil)
        }
        return channel.eventLoop.makeCompletedFuture {
            if let sslContext {
                let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: target.isIPAddress ? nil : target.host)
                try channel.pipeline.syncOperations.addHandler(tls, position: .first)
            }
            let upgrade = try configureUpgrade(channel: channel, logger: logger)
            upgrade.whenComplete { _ in deadline.cancel() }
            return upgrade
        }
    }

    private func configureUpgrade(channel: any Channel, logger: Logger) throws -> EventLoopFuture<Upgrade> {
        let extensionBuilders = configuration.extensions
        let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
            // NIO's precondition: a frame limit fits in 32 bits.
            maxFrameSize: min(max(configuration.maxFrameSize, 1), Int(UInt32.max)),
            // Protocol errors (an oversized frame) reach the reader as errors, so the owner learns the cause.
            enableAutomaticErrorHandling: false,
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    let asyncChannel = try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(wrappingChannelSynchronously: channel)
                    var fields = HTTPFields()
                    for header in head.headers {
                        if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
                    }
                    return .websocket(asyncChannel, try extensionBuilders.buildClientExtensions(from: fields))
                }
            }
        )
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: target.hostHeader)
        headers.add(name: "Origin", value: target.origin)
        for field in configuration.additionalHeaders { headers.add(name: field.name.rawName, value: field.value) }
        for builder in extensionBuilders {
            let offer = builder.clientRequestHeader()
            if !offer.isEmpty { headers.add(name: "Sec-WebSocket-Extensions", value: offer) }
        }
        let request = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.path, headers: headers)
        let upgradeConfiguration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
            upgradeRequestHead: request,
            upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(.declined) }
        )
        var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: upgradeConfiguration)
        pipeline.leftOverBytesStrategy = .forwardBytes
        return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
    }

    func handle(value: Value, logger: Logger) async throws -> WebSocketCloseFrame? {
        switch try await value.get() {
        case .declined:
            throw UpstreamTransportError.upgradeDeclined
        case .websocket(let channel, let extensions):
            return try await WebSocketHandler.handle(
                type: .client,
                configuration: .init(
                    extensions: extensions, autoPing: .disabled, closeTimeout: configuration.closeTimeout,
                    validateUTF8: configuration.validateUTF8, maxFrameSize: configuration.maxFrameSize),
                asyncChannel: channel,
                context: Context(logger: logger),
                handler: handler
            )
        }
    }
}

/// The channel of the current attempt, so its owner can close it from outside the
/// connection's task (a deadline, a close, a cancelled run).
final class ChannelHandle: Sendable {
    private let state = NIOLockedValueBox<(channel: (any Channel)?, closed: Bool)>((nil, false))

    func attach(_ channel: any Channel) {
        let closeNow = state.withLockedValue { state -> Bool in
            state.channel = channel
            return state.closed
        }
        if closeNow { channel.close(promise: nil) }
    }

    func close() {
        let channel = state.withLockedValue { state -> (any Channel)? in
            state.closed = true
            return state.channel
        }
        channel?.close(promise: nil)
    }
}

enum UpstreamTransportError: Error, Equatable, CustomStringConvertible {
    case upgradeDeclined
    case invalidURL(String)
    /// A message (or one frame of it) over the size limit, in bytes.
    case messageTooLarge(limit: Int)
    case protocolViolation(String)

    var description: String {
        switch self {
        case .upgradeDeclined: "the upstream declined the WebSocket upgrade"
        case .invalidURL(let url): "not a ws:// or wss:// URL: \(url)"
        case .messageTooLarge(let limit): "the upstream sent a message over the limit of \(limit) bytes"
        case .protocolViolation(let what): "the upstream broke the WebSocket protocol: \(what)"
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
