import HTTPTypes
import Hummingbird
import Tracing

/// A span per routed HTTP request (kind server), the first middleware, so every other one and
/// the route run inside it: named `METHOD /route` once the route is known, with the method, the
/// path, the query (credentials redacted), the route and the status. A `traceparent` the client
/// sends makes it a child of the client's span. It ends when the response's head is ready, so an
/// event stream's span covers its opening, not its life. Probes (`/healthz`, `/readyz`) and
/// `/metrics` are not traced. Uses the process's tracer (`InstrumentationSystem`, a no-op unless
/// tracing is on), or the task's (`withTracer`, in tests).
struct RequestTracing: RouterMiddleware {
    typealias Context = BridgeRequestContext

    static let untraced: Set<String> = ["/healthz", "/readyz", "/metrics"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !Self.untraced.contains(request.uri.path) else { return try await next(request, context) }
        let tracer = InstrumentationSystem.tracer
        var parent = ServiceContext.current ?? .topLevel
        tracer.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        let span = tracer.startSpan(request.method.rawValue, context: parent, ofKind: .server)
        span.updateAttributes { attributes in
            attributes["http.request.method"] = request.method.rawValue
            attributes["url.path"] = request.uri.path
            if let query = Self.redacted(request.uri.query) { attributes["url.query"] = query }
        }
        do {
            let response = try await ServiceContext.$current.withValue(span.context) { try await next(request, context) }
            Self.finish(span, status: response.status, route: context.endpointPath, method: request.method)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            span.recordError(error)
            Self.finish(span, status: status, route: context.endpointPath, method: request.method)
            throw error
        }
    }

    /// The span of a stream the front door opened, or refused, on the connection's event loop
    /// (no middleware runs there): from `start` to now, as the middleware would have made it.
    static func opened(_ head: HTTPRequest, route: String, status: HTTPResponse.Status, at start: DefaultTracerClock.Instant) {
        let tracer = InstrumentationSystem.tracer
        var parent = ServiceContext.current ?? .topLevel
        tracer.extract(head.headerFields, into: &parent, using: HTTPFieldsExtractor())
        let span = tracer.startSpan(head.method.rawValue, context: parent, ofKind: .server, at: start)
        let path = head.path ?? "/"
        let query = path.firstIndex(of: "?").map { String(path[path.index(after: $0)...]) }
        span.updateAttributes { attributes in
            attributes["http.request.method"] = head.method.rawValue
            attributes["url.path"] = String(path.prefix { $0 != "?" })
            if let query = redacted(query) { attributes["url.query"] = query }
        }
        finish(span, status: status, route: route, method: head.method)
    }

    static func finish(_ span: any Span, status: HTTPResponse.Status, route: String?, method: HTTPRequest.Method) {
        if let route {
            span.operationName = "\(method.rawValue) \(route)"
            span.attributes["http.route"] = route
        }
        span.attributes["http.response.status_code"] = Int64(status.code)
        if status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
        span.end()
    }

    /// The query with the value of every parameter that may carry a credential (`token`, any
    /// name with `token`, `password`, `secret` or `key` in it) replaced by `REDACTED`.
    static func redacted(_ query: String?) -> String? {
        guard let query, !query.isEmpty else { return nil }
        return query.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            let name = pair.prefix { $0 != "=" }.lowercased()
            guard pair.contains("="), ["token", "password", "secret", "key"].contains(where: { name.contains($0) }) else { return String(pair) }
            return pair.prefix { $0 != "=" } + "=REDACTED"
        }.joined(separator: "&")
    }
}

/// Reads a header for a propagator (`traceparent`, `tracestate`).
struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from fields: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { fields[$0] }
    }
}
