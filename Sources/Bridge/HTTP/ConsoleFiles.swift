import HTTPTypes
import Hummingbird
import Logging

/// The web console: files from `public/`, served at `/` by Hummingbird's `FileMiddleware`
/// (which refuses paths with `..` and never lists a folder). Every file is revalidated
/// (`no-cache`, with its ETag), so a new version of the page is picked up at once.
enum ConsoleFiles {
    static func middleware(folder: String, logger: Logger) -> FileMiddleware<BridgeRequestContext, LocalFileSystem> {
        FileMiddleware(
            folder, cacheControl: CacheControl([(MediaType(type: .any), [.noCache])]), searchForIndexHtml: true, logger: logger
        )
        .withAdditionalMediaType(.init(type: .text, subType: "javascript"), mappedToFileExtension: "mjs")
    }
}
