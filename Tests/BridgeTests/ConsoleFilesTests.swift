import Bridge
import DDP
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import Testing

/// The web console's files: content types, caching, the Content-Security-Policy, and nothing
/// served from outside the folder or listed.
@Suite struct ConsoleFilesTests {
    static let projectPublic = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("public").path

    @Test func theConsoleIsServedWithItsTypesCachingAndPolicy() async throws {
        try await BridgeHarness.run(configure: { $0.console = .folder(Self.projectPublic) }) { h in
            let page = try await h.request(.get, "/")
            #expect(page.status == .ok)
            #expect(page.headers[.contentType]?.hasPrefix("text/html") == true)
            #expect(page.text.contains("<title>ddp-bridge console</title>"))
            #expect(page.headers[.contentSecurityPolicy]?.contains("default-src 'self'") == true)
            #expect(page.headers[.contentSecurityPolicy]?.contains("script-src 'self';") == true)
            #expect(page.headers[.cacheControl] == "no-cache")
            #expect(page.headers[.eTag] != nil)
            #expect(page.headers[.xContentTypeOptions] == "nosniff")
            for (path, type) in [("/console.js", "javascript"), ("/api.js", "javascript"), ("/console.css", "text/css")] {
                let file = try await h.request(.get, path)
                #expect(file.status == .ok, "\(path)")
                #expect(file.headers[.contentType]?.contains(type) == true, "\(path): \(file.headers[.contentType] ?? "")")
            }
            // The API keeps its JSON answers, with the same headers.
            expectError(try await h.request(.get, "/v1/nothing-here"), .notFound, "not-found")
            let health = try await h.request(.get, "/healthz")
            #expect(health.headers[.contentSecurityPolicy] != nil)
        }
    }

    @Test func nothingOutsideTheFolderIsServedAndNoFolderIsListed() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("console-\(UUID().uuidString)")
        let folder = root.appendingPathComponent("public")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("assets"), withIntermediateDirectories: true)
        try "secret-outside".write(to: root.appendingPathComponent("secret.txt"), atomically: true, encoding: .utf8)
        try "<p>inside</p>".write(to: folder.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        try "inside-asset".write(to: folder.appendingPathComponent("assets/a.txt"), atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: root) }
        try await BridgeHarness.run(configure: { $0.console = .folder(folder.path) }) { h in
            let port = try #require(h.client.port)
            #expect(try await raw(port, "/assets/a.txt").contains("inside-asset"))
            for path in ["/../secret.txt", "/%2e%2e/secret.txt", "/assets/../../secret.txt", "/assets/%2E%2E/%2E%2E/secret.txt"] {
                let answer = try await raw(port, path)
                #expect(!answer.contains("secret-outside"), "\(path) escaped the folder")
                #expect(!answer.hasPrefix("HTTP/1.1 200"), "\(path): \(answer.prefix(40))")
            }
            let listing = try await raw(port, "/assets/")
            #expect(listing.hasPrefix("HTTP/1.1 404"), "a folder is not listed: \(listing.prefix(60))")
            #expect(!listing.contains("a.txt"))
        }
    }

    @Test func withNoneThereIsNoConsole() async throws {
        let settings = try Settings(flags: ["upstream": "ws://meteor:3000/websocket", "public-dir": "none"], environment: [:])
        #expect(settings.configuration.console == .none)
        try await BridgeHarness.run(configure: { $0.console = .none }) { h in
            expectError(try await h.request(.get, "/"), .notFound, "not-found")
        }
    }

    /// By default the console built into the binary is served: every file of public/ as it is on
    /// disk, byte for byte, with its type, and revalidated by its ETag. Nothing else is a file, and
    /// a folder is not listed. The start's log says where the files come from.
    @Test func byDefaultTheConsoleBuiltIntoTheBinaryIsServed() async throws {
        let settings = try Settings(flags: ["upstream": "ws://meteor:3000/websocket"], environment: [:])
        #expect(settings.configuration.console == .embedded)
        let root = URL(fileURLWithPath: Self.projectPublic)
        let onDisk = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)).compactMap { item -> String? in
            guard let url = item as? URL, !url.hasDirectoryPath else { return nil }
            return String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count))
        }
        #expect(onDisk.count >= 10 && onDisk.contains("/index.html") && onDisk.contains("/js/app.js"), "\(onDisk)")
        let (lines, logger) = LogLines.logger(level: .info)
        try await BridgeHarness.run(configure: { $0.console = settings.configuration.console }, logger: logger) { h in
            for path in onDisk {
                let file = try await h.request(.get, path)
                let expected = try Data(contentsOf: root.appendingPathComponent(String(path.dropFirst())))
                #expect(file.status == .ok, "\(path)")
                #expect(Data(file.text.utf8) == expected, "\(path) is served as it is in public/")
            }
            let page = try await h.request(.get, "/")
            #expect(page.status == .ok && page.text.contains("<title>ddp-bridge console</title>"))
            #expect(page.headers[.contentType]?.hasPrefix("text/html") == true)
            #expect(page.headers[.cacheControl] == "no-cache")
            let tag = try #require(page.headers[.eTag])
            let again = try await h.request(.get, "/index.html", headers: [.ifNoneMatch: tag])
            #expect(again.status == .notModified)
            #expect(try await h.request(.get, "/js/app.js").headers[.contentType]?.contains("javascript") == true)
            #expect(try await h.request(.get, "/js").status == .movedPermanently)
            expectError(try await h.request(.get, "/js/"), .notFound, "not-found")
            expectError(try await h.request(.get, "/nothing.js"), .notFound, "not-found")
            expectError(try await h.request(.get, "/v1/nothing-here"), .notFound, "not-found")
            let port = try #require(h.client.port)
            let escape = try await raw(port, "/js/../../Package.swift")
            #expect(!escape.hasPrefix("HTTP/1.1 200"), "\(escape.prefix(60))")
            let served = lines.all.first { $0.contains("web console served at /") }
            #expect(served?.contains("built into the binary") == true, "\(lines.all)")
        }
    }

    static func temporaryFolder() throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("console-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder.standardizedFileURL.resolvingSymlinksInPath().path
    }

    static func write(_ files: [String: String], in folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for (name, text) in files { try text.write(toFile: folder + "/" + name, atomically: true, encoding: .utf8) }
    }

    /// One request on its own connection, the path sent exactly as given.
    private func raw(_ port: Int, _ path: String) async throws -> String {
        let connection = try await RawConnection.open(port: port)
        try await connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        _ = try await connection.waitUntilClosed(within: .seconds(5))
        return await connection.received
    }
}
