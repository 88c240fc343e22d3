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

    /// Every thread of the harness at ``reference``; false when one could not be set (raising a
    /// priority again needs privileges an ordinary user may not have).
    @discardableResult static func levelOwn() -> Bool { set(threadsOf: "self", to: reference) }

    /// Every thread of process `pid` (one the harness started) at ``reference``; the threads it
    /// makes later inherit the value.
    static func level(_ pid: Int32) { set(threadsOf: String(pid), to: reference) }

    /// Every thread of the harness at `nice`.
    static func setOwn(_ nice: Int32) { set(threadsOf: "self", to: nice) }

    /// The ids of a process's threads (`self` for the harness's own), from Linux's `/proc`.
    static func threads(of process: String) -> [id_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/task")) ?? []).compactMap { id_t($0) }
    }

    @discardableResult private static func set(threadsOf process: String, to nice: Int32) -> Bool {
        threads(of: process).reduce(true) { all, tid in setpriority(__priority_which_t(PRIO_PROCESS.rawValue), tid, nice) == 0 && all }
    }
}
