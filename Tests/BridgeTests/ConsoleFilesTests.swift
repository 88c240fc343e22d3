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
        try await BridgeHarness.run(configure: { $0.publicFolder = Self.projectPublic }) { h in
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
        try await BridgeHarness.run(configure: { $0.publicFolder = folder.path }) { h in
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

    @Test func withoutAFolderThereIsNoConsole() async throws {
        try await BridgeHarness.run { h in
            expectError(try await h.request(.get, "/"), .notFound, "not-found")
        }
    }

    /// Started with the default setting from a working directory with no console in it (and
    /// neither beside the executable), the bridge finds the console it was built with, and serves it.
    @Test func byDefaultTheConsoleShippedWithTheBinaryIsServedFromAnyWorkingDirectory() async throws {
        let elsewhere = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: elsewhere) }
        var places = ConsoleFolder.Places.current
        places.workingDirectory = elsewhere
        let settings = try Settings(flags: ["upstream": "ws://meteor:3000/websocket"], environment: [:], consolePlaces: places)
        let folder = try #require(settings.configuration.publicFolder)
        #expect(folder == URL(fileURLWithPath: Self.projectPublic).standardizedFileURL.path)
        #expect(settings.configuration.consoleSearched.isEmpty)
        let (lines, logger) = LogLines.logger(level: .info)
        try await BridgeHarness.run(configure: { $0.publicFolder = folder }, logger: logger) { h in
            let page = try await h.request(.get, "/")
            #expect(page.status == .ok && page.text.contains("<title>ddp-bridge console</title>"))
            let served = lines.all.first { $0.contains("web console served at /") }
            #expect(served?.contains(folder) == true, "the start says where the console is served from: \(lines.all)")
        }
    }

    /// The places, in order: beside the executable, an installation's share folder, the image's,
    /// the checkout's, the working directory's. A folder without the console's files (a Meteor
    /// app's own public/) is passed over; when none holds it, every place looked at is named.
    @Test func theSearchTakesTheFirstFolderHoldingTheConsole() throws {
        let root = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let places = ConsoleFolder.Places(
            executable: root + "/prefix/bin/ddp-bridge", sourceRoot: root + "/checkout", workingDirectory: root + "/app")
        let candidates = ConsoleFolder.candidates(places)
        #expect(
            candidates == [
                root + "/prefix/bin/public", root + "/prefix/share/ddp-bridge/public", "/app/public", root + "/checkout/public", root + "/app/public"
            ])
        #expect(ConsoleFolder.search(places) == .failure(.init(searched: candidates)))
        // A Meteor app's public/ in the working directory is not the console.
        try Self.write(["index.html": "<p>the app's own page</p>"], in: root + "/app/public")
        #expect(ConsoleFolder.search(places) == .failure(.init(searched: candidates)))
        try Self.write(["index.html": "<title>console</title>", "console.js": ""], in: root + "/checkout/public")
        #expect(ConsoleFolder.search(places) == .success(root + "/checkout/public"))
        try Self.write(["index.html": "<title>console</title>", "console.js": ""], in: root + "/prefix/share/ddp-bridge/public")
        #expect(ConsoleFolder.search(places) == .success(root + "/prefix/share/ddp-bridge/public"))
        // The same folder reached twice is looked at once.
        let same = ConsoleFolder.Places(executable: root + "/bin/ddp-bridge", sourceRoot: root + "/bin/", workingDirectory: root + "/bin/../bin")
        #expect(ConsoleFolder.candidates(same) == [root + "/bin/public", root + "/share/ddp-bridge/public", "/app/public"])
    }

    /// Not found: no console, and the start's warning names every place looked at. Turned off
    /// (`none`) or named: no search.
    @Test func aConsoleNotFoundIsAWarningNamingThePlacesSearched() async throws {
        let root = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let places = ConsoleFolder.Places(executable: root + "/bin/ddp-bridge", sourceRoot: nil, workingDirectory: root)
        let upstream = ["upstream": "ws://meteor:3000/websocket"]
        let settings = try Settings(flags: upstream, environment: [:], consolePlaces: places)
        #expect(settings.configuration.publicFolder == nil)
        #expect(settings.configuration.consoleSearched == ConsoleFolder.candidates(places) && settings.configuration.consoleSearched.count == 4)
        let off = try Settings(flags: upstream, environment: ["DDP_BRIDGE_PUBLIC_DIR": "none"], consolePlaces: places)
        #expect(off.configuration.publicFolder == nil && off.configuration.consoleSearched.isEmpty)
        let named = try Settings(flags: upstream.merging(["public-dir": root]) { $1 }, environment: [:], consolePlaces: places)
        #expect(named.configuration.publicFolder == root && named.configuration.consoleSearched.isEmpty)
        let (lines, logger) = LogLines.logger(level: .info)
        let searched = settings.configuration.consoleSearched
        try await BridgeHarness.run(configure: { $0.consoleSearched = searched }, logger: logger) { h in
            expectError(try await h.request(.get, "/"), .notFound, "not-found")
            let warning = try #require(lines.all.first { $0.contains("no web console at /") }, "\(lines.all)")
            #expect(warning.contains("\"level\":\"warning\""), "\(warning)")
            for place in searched { #expect(warning.contains(place), "\(warning) names \(place)") }
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
