import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The web console, served at `/` by Hummingbird's `FileMiddleware` (which refuses paths with
/// `..` and never lists a folder): by default the files built into the binary
/// (``EmbeddedConsoleFiles``), or a folder's (`--public-dir`). Every file is revalidated
/// (`no-cache`, with its ETag), so a new version of the page is picked up at once.
enum ConsoleFiles {
    static func middleware(_ source: ConsoleSource, logger: Logger) -> (any MiddlewareProtocol<Request, Response, BridgeRequestContext>)? {
        switch source {
        case .none: return nil
        case .embedded: return serving(EmbeddedConsoleFiles.shipped)
        case .folder(let folder):
            return FileMiddleware(folder, cacheControl: cacheControl, searchForIndexHtml: true, logger: logger)
                .withAdditionalMediaType(.init(type: .text, subType: "javascript"), mappedToFileExtension: "mjs")
        }
    }

    static func serving<Files: FileProvider>(_ files: Files) -> FileMiddleware<BridgeRequestContext, Files>
    where Files.FileAttributes: FileMiddlewareFileAttributes {
        FileMiddleware(fileProvider: files, cacheControl: cacheControl, searchForIndexHtml: true)
            .withAdditionalMediaType(.init(type: .text, subType: "javascript"), mappedToFileExtension: "mjs")
    }

    static let cacheControl = CacheControl([(MediaType(type: .any), [.noCache])])
}

/// Files held in memory, by their path (`/index.html`, `/js/app.js`): the console built into
/// the binary. A path is a file, a folder (a prefix of some file's path, and `/`), or nothing;
/// nothing outside the set can be named.
struct EmbeddedConsoleFiles: FileProvider {
    struct Attributes: FileMiddlewareFileAttributes {
        let isFolder: Bool
        let size: Int
        let modificationDate: Date
    }

    let files: [String: ByteBuffer]
    let folders: Set<String>
    let modified: Date

    init(files: [String: String], modified: Date) {
        self.files = files.mapValues { ByteBuffer(string: $0) }
        var folders: Set<String> = ["/"]
        for path in files.keys {
            var parts = path.split(separator: "/").dropLast()
            while !parts.isEmpty {
                folders.insert("/" + parts.joined(separator: "/"))
                parts = parts.dropLast()
            }
        }
        self.folders = folders
        self.modified = modified
    }

    /// The console this binary was built with.
    static let shipped = EmbeddedConsoleFiles(
        files: EmbeddedConsole.files, modified: Date(timeIntervalSince1970: Double(EmbeddedConsole.modified)))

    func getFileIdentifier(_ path: String) -> String? {
        // A folder may be named with its closing slash (`/js/`).
        path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    func getAttributes(id: String) async throws -> Attributes? {
        if let file = files[id] { return Attributes(isFolder: false, size: file.readableBytes, modificationDate: modified) }
        if folders.contains(id) { return Attributes(isFolder: true, size: 0, modificationDate: modified) }
        return nil
    }

    func loadFile(id: String, context: some RequestContext) async throws -> ResponseBody {
        guard let file = files[id] else { throw HTTPError(.notFound) }
        return ResponseBody(byteBuffer: file)
    }

    func loadFile(id: String, range: ClosedRange<Int>, context: some RequestContext) async throws -> ResponseBody {
        guard let file = files[id], range.lowerBound >= 0, range.lowerBound < file.readableBytes else { throw HTTPError(.rangeNotSatisfiable) }
        let upper = min(range.upperBound, file.readableBytes - 1)
        return ResponseBody(byteBuffer: file.getSlice(at: file.readerIndex + range.lowerBound, length: upper - range.lowerBound + 1) ?? ByteBuffer())
    }
}
