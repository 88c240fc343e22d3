import DDP
import Logging

extension ServerCore {
    /// Runs a method and answers it with Meteor's ordering: when the method's writes reach
    /// this connection, `result`, the data, then `updated`; otherwise `updated`, then `result`.
    func callMethod(_ connection: Int, _ id: String, name: String, params: [EJSON], randomSeed: String?) async {
        guard let caller = connections[connection] else { return }
        methodsStarted[name, default: 0] += 1
        stateChanged()
        let outcome: Result<EJSON?, DDPError>
        if let builtin = builtinMethod(name) {
            outcome = builtin(connection, params)
        } else if let handler = configuration.methods[name] {
            let invocation = MethodInvocation(
                userId: caller.userId, connectionID: connection, randomSeed: randomSeed, clientAddress: caller.clientAddress, core: self)
            do {
                outcome = .success(try await handler(invocation, params))
            } catch let error as DDPError {
                outcome = .failure(error)
            } catch {
                logger.error("method failed", metadata: ["ddp.method": "\(name)", "error": "\(error)"])
                outcome = .failure(.meteor(500, "Internal server error"))
            }
        } else if configuration.collectionMethods, let collectionMethod = parseCollectionMethod(name) {
            outcome = await callCollectionMethod(connection, collectionMethod, params: params, randomSeed: randomSeed)
        } else {
            send(connection, .result(id: id, outcome: .failure(.methodNotFound(name))))
            send(connection, .updated(methods: [id]))
            return
        }
        let data = flushFenced()
        let mine = data.contains { $0.0 == connection }
        if mine { send(connection, .result(id: id, outcome: outcome)) }
        for (target, message) in data { send(target, message) }
        send(connection, .updated(methods: [id]))
        if !mine { send(connection, .result(id: id, outcome: outcome)) }
    }

    private func builtinMethod(_ name: String) -> ((Int, [EJSON]) -> Result<EJSON?, DDPError>)? {
        switch name {
        case "login": return { self.login($0, $1) }
        case "logout": return { self.logout($0, $1) }
        case "createUser": return { self.createUser($0, $1) }
        default: return nil
        }
    }

    enum CollectionMethod {
        case insert(String)
        case update(String)
        case remove(String)
    }

    /// `/<collection>/insert|update|remove`, also with Meteor 3's `Async` suffix.
    private func parseCollectionMethod(_ name: String) -> CollectionMethod? {
        guard name.hasPrefix("/") else { return nil }
        let parts = name.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty else { return nil }
        let collection = String(parts[0])
        switch parts[1] {
        case "insert", "insertAsync": return .insert(collection)
        case "update", "updateAsync": return .update(collection)
        case "remove", "removeAsync": return .remove(collection)
        default: return nil
        }
    }

    /// Meteor's rules for untrusted code: update and remove select one document by `_id`; no upserts.
    private func callCollectionMethod(_ connection: Int, _ method: CollectionMethod, params: [EJSON], randomSeed: String?) async -> Result<
        EJSON?, DDPError
    > {
        do {
            switch method {
            case .insert(let collection):
                guard case .object(let document)? = params.first else { throw DDPError.meteor(400, "insert needs a document") }
                return .success(.string(try insert(collection, document, randomSeed: randomSeed, fenced: true)))
            case .update(let collection):
                guard params.count >= 2, case .object(let modifier) = params[1] else {
                    throw DDPError.meteor(400, "update needs a selector and a modifier")
                }
                if case .object(let options)? = params.dropFirst(2).first, options["upsert"]?.boolValue == true {
                    throw DDPError.meteor(403, "Access denied. Upserts not allowed in a restricted collection.")
                }
                guard let selector = try singleIDSelector(params[0]) else {
                    throw DDPError.meteor(403, "Not permitted. Untrusted code may only update documents by ID.")
                }
                return .success(.int(try update(collection, selector, modifier, fenced: true)))
            case .remove(let collection):
                guard let first = params.first, let selector = try singleIDSelector(first) else {
                    throw DDPError.meteor(403, "Not permitted. Untrusted code may only remove documents by ID.")
                }
                return .success(.int(try remove(collection, selector, fenced: true)))
            }
        } catch let error as DDPError {
            return .failure(error)
        } catch {
            return .failure(.meteor(500, "Internal server error"))
        }
    }

    private func singleIDSelector(_ value: EJSON) throws -> EJSON? {
        guard let id = try makeSelector(value).singleID else { return nil }
        return ["_id": id]
    }
}
