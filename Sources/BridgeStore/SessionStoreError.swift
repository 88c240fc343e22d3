/// Why a session store call failed (the store's callers log it; it never reaches a user).
package enum SessionStoreError: Error, CustomStringConvertible {
    case corruptRow(String)
    case timedOut(String)
    case unsafeFile(String)
    case refused(String)

    package var description: String {
        switch self {
        case .refused(let reason): reason
        case .unsafeFile(let path): "'\(path)' is not a regular file this process can create or open (a symbolic link is refused)"
        case .corruptRow(let hash): "the stored session \(hash.prefix(8))… cannot be read"
        case .timedOut(let operation): "the session store did not answer \(operation) in time"
        }
    }
}
