import DDP
import DDPClient
import Hummingbird

extension BridgeRoutes {
    struct SubscriptionRequest: Sendable {
        let name: String
        let params: [EJSON]
        let wait: Bool
        let timeout: Duration
        /// The request named its own timeout (else it is `--request-timeout`).
        let timeoutGiven: Bool
    }

    /// `POST /v1/subscriptions`: `{"name", "params"?, "wait"? (true), "timeout"? (ms)}`, or an
    /// array of them: a group that answers when all are ready, or says which failed.
    @Sendable func subscribe(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let requests: [SubscriptionRequest]
        var isGroup = false
        switch try await RequestInput.body(request, limit: settings.maxBodySize) {
        case .object(let o)?: requests = [try parseSubscription(o)]
        case .array(let items)?:
            guard !items.isEmpty else { throw BridgeError.badRequest("a subscription group must not be empty") }
            isGroup = true
            requests = try items.map { item throws(BridgeError) in
                guard case .object(let o) = item else { throw .badRequest("each subscription must be an object {\"name\", \"params\"}") }
                return try parseSubscription(o)
            }
        case nil: throw BridgeError.badRequest("the body must be {\"name\", \"params\"} or an array of them")
        case let other?: throw BridgeError.badRequest("the body must be an object or an array, not \(other.typeName)")
        }
        let session = try await session(request, context)
        try await session.waitUntilConnected(timeout: settings.connectTimeout)
        let outcomes = await withTaskGroup(of: (Int, Result<SubscriptionInfo, BridgeError>).self) { group in
            for (index, item) in requests.enumerated() {
                group.addTask {
                    do {
                        return (index, .success(try await session.subscribe(item.name, params: item.params, wait: item.wait, timeout: item.timeout)))
                    } catch let error as DDPClientError where error.code == .timedOut {
                        return (
                            index,
                            .failure(
                                .timedOut(
                                    "the subscription '\(item.name)' with ready", after: item.timeout, given: item.timeoutGiven,
                                    setting: "--request-timeout", most: settings.maxRequestTimeout))
                        )
                    } catch {
                        return (index, .failure(BridgeError.from(error)))
                    }
                }
            }
            var collected: [(Int, Result<SubscriptionInfo, BridgeError>)] = []
            collected.reserveCapacity(requests.count)
            for await outcome in group { collected.append(outcome) }
            return collected.sorted { $0.0 < $1.0 }.map(\.1)
        }
        await registry.save(session)
        if !isGroup {
            switch outcomes[0] {
            case .success(let info): return Reply.json(info.ejson, status: .created)
            case .failure(let error): throw error
            }
        }
        let described: [EJSON] = zip(requests, outcomes).map { item, outcome in
            switch outcome {
            case .success(let info): return info.ejson
            case .failure(let error):
                return ["name": .string(item.name), "params": .array(item.params), "state": "error", "error": error.body]
            }
        }
        guard let failure = outcomes.first(where: { if case .failure = $0 { true } else { false } }), case .failure(let first) = failure else {
            return Reply.json(.array(described), status: .created)
        }
        throw BridgeError(
            .subscriptionFailed(first.status),
            "\(outcomes.filter { if case .failure = $0 { true } else { false } }.count) of \(requests.count) subscriptions failed: \(first.reason)",
            details: ["subscriptions": .array(described)], retryAfter: first.retryAfter)
    }

    func parseSubscription(_ o: EJSONObject) throws(BridgeError) -> SubscriptionRequest {
        guard case .string(let name)? = o["name"], !name.isEmpty else { throw .badRequest("name must be a non-empty string") }
        let params: [EJSON]
        switch o["params"] {
        case nil: params = []
        case .array(let list)?: params = list
        default: throw .badRequest("params must be an array")
        }
        let wait: Bool
        switch o["wait"] {
        case nil: wait = true
        case .bool(let b)?: wait = b
        default: throw .badRequest("wait must be true or false")
        }
        var timeout = settings.requestTimeout
        let timeoutGiven = o["timeout"] != nil
        if let value = o["timeout"] {
            timeout = try RequestInput.milliseconds(value.intValue, name: "timeout", max: settings.maxRequestTimeout, given: value.description)
        }
        return SubscriptionRequest(name: name, params: params, wait: wait, timeout: timeout, timeoutGiven: timeoutGiven)
    }

    /// `GET /v1/subscriptions`.
    @Sendable func listSubscriptions(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let session = try await session(request, context)
        return Reply.json(.array(session.subscriptions.map(\.ejson)))
    }

    /// `DELETE /v1/subscriptions/{id}`: drops one reference; the upstream `unsub` follows after the linger.
    @Sendable func unsubscribe(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let session = try await session(request, context)
        guard session.unsubscribe(id) else { throw BridgeError.notFound("No subscription '\(id)' in this session") }
        await registry.save(session)
        return Response(status: .noContent)
    }

    /// `DELETE /v1/subscriptions?name=`: drops every subscription of that publication.
    @Sendable func unsubscribeByName(_ request: Request, _ context: BridgeRequestContext) async throws -> Response {
        guard let name = RequestInput.query(request, "name"), !name.isEmpty else {
            throw BridgeError.badRequest("name is needed: DELETE /v1/subscriptions?name=publication")
        }
        let session = try await session(request, context)
        let removed = session.unsubscribe(named: name)
        await registry.save(session)
        return Reply.json(["removed": .int(removed)])
    }
}
