import DDP
import DDPClient
import DDPServer
import FaultKit
import Foundation
import Logging
import NIOSSL
import Testing

/// `wss://` against the in-process server with a certificate made for the test.
@Suite struct TLSTests {
    /// A self-signed certificate for localhost, made with the openssl command.
    static func makeCertificate() throws -> (certificate: String, key: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ddp-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let certificate = folder.appendingPathComponent("cert.pem").path
        let key = folder.appendingPathComponent("key.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate,
            "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"
        ]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { throw ConditionNotMet(description: "openssl could not make a certificate") }
        return (certificate, key)
    }

    static func startTLSServer(_ files: (certificate: String, key: String)) async throws -> LocalDDPServer {
        let server = LocalDDPServer(configuration: DemoDataSet.configuration, logger: Logger(label: "tls-server"))
        try await DemoDataSet.seed(server.core)
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(files.certificate).map { .certificate($0) },
            privateKey: .file(files.key))
        try await server.start(tls: tls)
        return server
    }

    /// TLS needs a host name: WSClient sends the URL's host as SNI, and an IP address is not allowed there.
    static func localhostURL(_ server: LocalDDPServer) async -> String {
        await server.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
    }

    @Test func trustsTheServerThroughACustomCAFile() async throws {
        let files = try Self.makeCertificate()
        let server = try await Self.startTLSServer(files)
        let url = await Self.localhostURL(server)
        #expect(url.hasPrefix("wss://localhost:"))
        try await withClient(url, configure: { $0.tls = .init(caFile: files.certificate) }) { client, _ in
            let echoed = try await client.call("echo", params: ["over TLS"])
            #expect(echoed == ["over TLS"])
        }
        await server.stop()
    }

    @Test func acceptsASelfSignedCertificateOnlyWhenAsked() async throws {
        let files = try Self.makeCertificate()
        let server = try await Self.startTLSServer(files)
        let url = await Self.localhostURL(server)
        try await withClient(url, configure: { $0.tls = .init(allowSelfSigned: true) }) { client, _ in
            let echoed = try await client.call("echo", params: [1])
            #expect(echoed == [1])
        }
        // Without the opt-in the certificate is refused: the client never connects.
        var options = DDPClientOptions(url: url)
        options.protocolConfiguration.reconnect = ReconnectPolicy(initialDelay: .milliseconds(50), maxDelay: .milliseconds(100))
        let log = ClientEventRecorder()
        let client = DDPClient(options: options, logger: Logger(label: "untrusting"), events: ClosureEventSink { log.append($0) })
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            try? await log.wait("two failed attempts") { _ in log.reconnects >= 2 }
            #expect(await !client.isConnected)
            #expect(!log.states.contains { if case .connected = $0 { return true } else { return false } })
            await client.close()
        }
        // Each attempt names the cause: the certificate did not verify, and how to trust it.
        let causes = log.states.compactMap { if case .reconnecting(_, _, let cause) = $0 { cause } else { nil } }
        #expect(causes.first?.code == .tlsFailed, "\(causes)")
        #expect(causes.first?.message == "the TLS handshake failed: certificate verify failed", "\(causes)")
        #expect(causes.first?.hint?.contains("--upstream-ca-file") == true)
        await server.stop()
    }

    /// A `ws://` URL at a TLS port: no HTTP answer to the upgrade, and the hint says wss://.
    @Test func aPlainURLAtATLSPortSaysToUseWSS() async throws {
        let files = try Self.makeCertificate()
        let server = try await Self.startTLSServer(files)
        let url = await server.url.replacingOccurrences(of: "wss://", with: "ws://")
        let (causes, _) = try await UpstreamCauseTests.failures(url, count: 1)
        let cause = try #require(causes.first ?? nil)
        // The server closes on the plain request (an alert that is not HTTP would be `upgrade-invalid`).
        #expect([UpstreamFailure.Code.connectionClosed, .upgradeInvalid].contains(cause.code), "\(cause.code): \(cause)")
        #expect(cause.hint?.hasPrefix("if the port expects TLS, use wss://") == true, "\(cause.code): \(cause)")
        await server.stop()
    }
}
