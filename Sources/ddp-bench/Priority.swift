import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One scheduling priority for everything a measurement runs: the harness's threads (its readers,
/// its in-process servers) and the servers it starts as processes. Linux keeps a nice value per
/// thread, and a process takes the one of the thread that starts it: a server started from a
/// thread whose value differs (a pool thread's, or one the load part lowered) would run above or
/// below the readers it is measured with, which on 2 cores decides its latency.
enum Priority {
    /// The nice value of the harness's first thread, read when the harness starts (main.swift).
    static let reference: Int32 = {
        errno = 0
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        return errno == 0 ? nice : 0
    }()

    /// Every thread of the harness at ``reference``.
    static func levelOwn() { level(threadsOf: "self") }

    /// Every thread of process `pid` (one the harness started) at ``reference``; the threads it
    /// makes later inherit the value.
    static func level(_ pid: Int32) { level(threadsOf: String(pid)) }

    private static func level(threadsOf process: String) {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/task")) ?? []
        for task in tasks {
            if let tid = id_t(task) { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), tid, reference) }
        }
    }
}
