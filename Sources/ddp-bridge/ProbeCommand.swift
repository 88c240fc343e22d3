import ArgumentParser
import Foundation
import NIOCore
import NIOPosix

/// Asks a running bridge's `/healthz` (or another probe path) once, over loopback, and exits 0
/// when it answers 200, 1 otherwise: the container image's HEALTHCHECK, with no curl in the image.
struct ProbeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Ask a running bridge's /healthz once; exit 0 when it answers 200, 1 otherwise (a container's health check)."
    )

    @Option(help: "Port of the bridge (default: DDP_BRIDGE_PORT, else 8080).")
    var port: Int?

    @Option(help: "Address of the bridge.")
    var host = "127.0.0.1"

    @Option(help: "The path asked: /healthz, or /readyz to ask whether the Meteor app is reachable too.")
    var path = "/healthz"

    @Option(help: "Seconds the answer may take.")
    var timeout: Double = 3

    func validate() throws {
        guard ["/healthz", "/readyz"].contains(path) else { throw ValidationError("--path must be /healthz or /readyz") }
        guard timeout.isFinite, timeout > 0, timeout <= 60 else { throw ValidationError("--timeout must be from 0 to 60 seconds") }
        if let port, !(1...65_535).contains(port) { throw ValidationError("--port must be from 1 to 65535") }
        if port == nil, let text = ProcessInfo.processInfo.environment["DDP_BRIDGE_PORT"], Int(text).map({ (1...65_535).contains($0) }) != true {
            throw ValidationError("DDP_BRIDGE_PORT must be a port from 1 to 65535, got '\(text)'")
        }
    }

    func run() async throws {
        let port = port ?? ProcessInfo.processInfo.environment["DDP_BRIDGE_PORT"].flatMap(Int.init) ?? 8080
        let (host, path) = (host, path)
        let answer = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                do {
                    return try await Self.ask(host: host, port: port, path: path, connectWithin: .milliseconds(Int64(timeout * 1000)))
                } catch {
                    FileHandle.standardError.write(Data("probe: cannot ask http://\(host):\(port)\(path): \(Self.reason(error))\n".utf8))
                    throw ExitCode(1)
                }
            }
            group.addTask {
                try await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let answer else {
            FileHandle.standardError.write(Data("probe: no answer from http://\(host):\(port)\(path) within \(timeout) s\n".utf8))
            throw ExitCode(1)
        }
        let status = answer.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? answer
        guard status.hasPrefix("HTTP/1.1 200") else {
            FileHandle.standardError.write(Data("probe: http://\(host):\(port)\(path) answered \(status)\n".utf8))
            throw ExitCode(1)
        }
    }

    /// An error in a few words: a refused connection says so.
    static func reason(_ error: any Error) -> String {
        let text = "\(error)"
        return text.contains("Connection refused") ? "connection refused" : text
    }

    /// The answer's head, as far as its status line.
    static func ask(host: String, port: Int, path: String, connectWithin limit: TimeAmount) async throws -> String {
        // The connect itself cannot be cancelled: its own timeout is the deadline.
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connectTimeout(limit)
        let channel = try await bootstrap.connect(host: host, port: port) { channel in
            channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
        }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n"))
            var text = ""
            for try await buffer in inbound {
                text += String(buffer: buffer)
                if text.contains("\r\n") || text.utf8.count > 4096 { break }
            }
            return text
        }
    }
}
