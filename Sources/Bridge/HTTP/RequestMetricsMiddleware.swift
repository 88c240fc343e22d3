import HTTPTypes
import Hummingbird

/// Counts requests by route pattern and status (`ddp_bridge_http_requests_total`).
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = BridgeRequestContext
    let metrics: BridgeMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        metrics.countRequest(route: context.endpointPath ?? "unmatched", status: Int(response.status.code))
        return response
    }
}
