import HTTPTypes
import Hummingbird
import Logging

/// The web console: files from `public/`, served at `/` by Hummingbird's `FileMiddleware`
/// (which refuses paths with `..` and never lists a folder). Every file is revalidated
/// (`no-cache`, with its ETag), so a new version of the page is picked up at once.
enum ConsoleFiles {
    static func middleware(folder: String, logger: Logger) -> FileMiddleware<BridgeRequestContext, LocalFileSystem> {
        FileMiddleware(
            folder, cacheControl: CacheControl([(MediaType(type: .any), [.noCache])]), searchForIndexHtml: true, logger: logger)
            .withAdditionalMediaType(.init(type: .text, subType: "javascript"), mappedToFileExtension: "mjs")
    }
}

/// Headers that keep a browser to the bridge's own origin: the console may load scripts,
/// styles and images only from the bridge and connect only to it; no framing, no sniffing.
struct SecurityHeadersMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext

    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        Self.add(to: &response.headers)
        return response
    }

    static func add(to headers: inout HTTPFields) {
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[.xContentTypeOptions] = "nosniff"
        headers[referrerPolicy] = "no-referrer"
    }
}
