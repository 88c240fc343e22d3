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
        let span = tracer.startSpan(request.method.rawValue, context: Self.parent(request.headers, tracer), ofKind: .server)
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
        let span = tracer.startSpan(head.method.rawValue, context: Self.parent(head.headerFields, tracer), ofKind: .server, at: start)
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
    /// name with `token`, `password`, `secret` or `key` in it, read as the routes read it:
    /// percent-decoded) replaced by `REDACTED`; a parameter whose name does not decode is
    /// redacted too.
    static func redacted(_ query: String?) -> String? {
        guard let query, !query.isEmpty else { return nil }
        return query.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            let raw = pair.prefix { $0 != "=" }
            guard pair.contains("=") else { return String(pair) }
            guard let name = QueryString.decode(raw)?.lowercased() else { return raw + "=REDACTED" }
            guard ["token", "password", "secret", "key"].contains(where: { name.contains($0) }) else { return String(pair) }
            return raw + "=REDACTED"
        }.joined(separator: "&")
    }

    /// The parent a client's W3C trace context names, or the task's: only `traceparent` and
    /// `tracestate` are handed to the tracer, and only a `traceparent` of the standard's shape (one
    /// header, `00-` 32 hex, 16 hex, 2 hex), so nothing else of a request (its credentials) reaches
    /// a tracer's log of a header it could not read.
    static func parent(_ fields: HTTPFields, _ tracer: any Tracer) -> ServiceContext {
        var parent = ServiceContext.current ?? .topLevel
        let parents = fields[values: .traceparent]
        guard parents.count == 1, let traceparent = parents.first, Self.isTraceparent(traceparent) else { return parent }
        let states = fields[values: .tracestate]
        let tracestate = states.count == 1 && (states.first?.utf8.count ?? 0) <= 512 ? states.first : nil
        tracer.extract(TraceContextHeaders(traceparent: traceparent, tracestate: tracestate), into: &parent, using: TraceContextHeaders.Reader())
        return parent
    }

    /// `version-traceid-parentid-flags` in lower-case hex: 2, 32, 16 and 2 digits.
    static func isTraceparent(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.map(\.count) == [2, 32, 16, 2] else { return false }
        return parts.allSatisfy { $0.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } }
    }
}

/// The two headers of a W3C trace context, all a tracer is given of a request.
struct TraceContextHeaders: Sendable {
    let traceparent: String
    let tracestate: String?

    struct Reader: Extractor {
        func extract(key: String, from headers: TraceContextHeaders) -> String? {
            switch key.lowercased() {
            case "traceparent": headers.traceparent
            case "tracestate": headers.tracestate
            default: nil
            }
        }
    }
}

extension HTTPField.Name {
    static let traceparent = Self("traceparent")!
    static let tracestate = Self("tracestate")!
}
