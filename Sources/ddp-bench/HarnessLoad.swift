import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the harness's own process is doing while it should be idle (before each part of a full
/// run): the CPU it used over a short wait, its threads and its open files. A part that comes
/// after others then says whether anything they left behind still runs beside it.
struct HarnessLoad: CustomStringConvertible {
    /// CPU time used during the wait, as a share of one core.
    let cores: Double
    let threads: Int
    let openFiles: Int
    /// The nice values its threads run at (one, unless something changed some of them).
    let nice: [Int]

    static func sample(over wait: Duration) async -> HarnessLoad {
        let before = cpuSeconds()
        let start = ContinuousClock.now
        try? await Task.sleep(for: wait)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return HarnessLoad(
            cores: seconds > 0 ? (cpuSeconds() - before) / seconds : 0,
            threads: Priority.threads(of: "self").count,
            openFiles: (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1,
            nice: threadNiceValues())
    }

    /// Each thread's nice value (the 19th field of Linux's `/proc/self/task/N/stat`), distinct, sorted.
    private static func threadNiceValues() -> [Int] {
        var values = Set<Int>()
        for task in Priority.threads(of: "self") {
            guard let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            if fields.count > 16, let nice = Int(fields[16]) { values.insert(nice) }
        }
        return values.sorted()
    }

    private static func cpuSeconds() -> Double {
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    var description: String {
        String(format: "harness before this part: %.2f cores busy over 1 s, %d threads, %d open files, nice ", cores, threads, openFiles)
            + nice.map(String.init).joined(separator: "/")
    }
}
