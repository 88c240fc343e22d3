/// A collection query named a collection no document of which is held: a typo, or nothing
/// subscribed that sends it. Its empty answer says so (`"collectionHeld": false`), with the
/// collections that are held and a hint, so that an empty list is not mistaken for "no matches".
struct AbsentCollection: Sendable, Equatable {
    /// The collection asked for.
    let name: String
    /// The collections held, in order.
    let held: [String]
    /// The public publication read (`GET /v1/public/collections/{name}`), or `nil` for a session's query.
    let publication: String?
    /// The names of the session's subscriptions (none for a public read).
    var subscriptions: [String] = []

    /// What to do about it, in words: the likely collection when the name looks mistyped, and
    /// where to look and what to subscribe to.
    var hint: String {
        let meant = ClosestName.suggestion(for: name, among: held).map { " (did you mean '\($0)'?)" } ?? ""
        if let publication {
            return "The publication '\(publication)' has sent no document of '\(name)'\(meant): heldCollections are the collections "
                + "its readers see (GET /v1/public/publications lists what may be read)"
        }
        if held.isEmpty, subscriptions.isEmpty {
            return "This session holds no documents yet: subscribe to a publication first (POST /v1/subscriptions with "
                + "{\"name\": \"…\"}); GET /v1/collections lists the collections it holds"
        }
        if held.isEmpty {
            // Subscribed, and sent nothing: a publication with nothing for this user (after a
            // logout, say) or one that sends other collections.
            let names = Array(Set(subscriptions)).sorted().joined(separator: ", ")
            return "This session's subscriptions (\(names)) have sent it no documents: none is published to it now "
                + "(a publication may send nothing to an anonymous session). GET /v1/subscriptions lists them"
        }
        return "This session holds no document of '\(name)'\(meant): none of its subscriptions has sent one. GET /v1/collections "
            + "lists the collections it holds; subscribe (POST /v1/subscriptions) to a publication that sends '\(name)'"
    }
}
