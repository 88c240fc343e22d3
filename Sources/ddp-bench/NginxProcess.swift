import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// nginx with the nchan module as a child process (the nchan part's baseline): the configuration
/// is `deploy/nchan/nginx.conf` with its folder and port filled in, written into a temporary
/// folder of its own that also holds the pid file, logs and temp paths, so nginx runs as the
/// current user. ``stop()`` ends it (SIGTERM, SIGKILL after a few seconds) and removes the folder.
struct NginxProcess {
    static let binary = "/usr/sbin/nginx"
    /// Where Debian's `libnginx-mod-nchan` puts the module; the template's `load_module` names it.
    static let module = "/usr/lib/nginx/modules/ngx_nchan_module.so"
    static let template = "deploy/nchan/nginx.conf"

    let process: Process
    let port: Int
    let folder: URL

    /// Why nginx with nchan cannot run here, or nil when it can be tried.
    static func unavailable() -> String? {
        if !FileManager.default.isExecutableFile(atPath: binary) { return "\(binary) is not installed (Debian package nginx)" }
        if !FileManager.default.fileExists(atPath: module) { return "\(module) is not installed (Debian package libnginx-mod-nchan)" }
        if templatePath() == nil { return "\(template) was not found from the working directory or beside the executable" }
        return nil
    }

    /// The template, from the working directory or from a folder above the executable (the
    /// package's root when run from `.build`).
    static func templatePath() -> String? {
        var candidates = [FileManager.default.currentDirectoryPath]
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(folder.path)
            folder = folder.deletingLastPathComponent()
        }
        return candidates.map { $0 + "/" + template }.first { FileManager.default.fileExists(atPath: $0) }
    }

    /// Starts nginx on a free loopback port and waits (bounded) until it answers and both workers
    /// are up; a start that fails (a port taken in between, say) is tried again, three times in all.
    static func start() async throws -> NginxProcess {
        guard let templatePath = templatePath() else { throw BenchError("\(template) not found") }
        let text = try String(contentsOfFile: templatePath, encoding: .utf8)
        var failures: [String] = []
        for _ in 0..<3 {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ddp-bench-nchan-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            do {
                return try await start(text: text, folder: folder, port: try await freePort())
            } catch {
                failures.append("\(error)")
                try? FileManager.default.removeItem(at: folder)
            }
        }
        throw BenchError("nginx did not start: " + failures.joined(separator: "; "))
    }

    private static func start(text: String, folder: URL, port: Int) async throws -> NginxProcess {
        let configuration = folder.appendingPathComponent("nginx.conf")
        try text.replacingOccurrences(of: "@FOLDER@", with: folder.path).replacingOccurrences(of: "@PORT@", with: String(port))
            .write(to: configuration, atomically: true, encoding: .utf8)
        let output = folder.appendingPathComponent("output.log")
        guard FileManager.default.createFile(atPath: output.path, contents: nil) else { throw BenchError("cannot write \(output.path)") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        // -e: the error log before the configuration is read (the default one is under /var/log).
        // Started by root, nginx would run its workers as nobody: keep them ours.
        process.arguments =
            ["-p", folder.path + "/", "-c", configuration.path, "-e", folder.appendingPathComponent("error.log").path]
            + (geteuid() == 0 ? ["-g", "user root;"] : [])
        let log = try FileHandle(forWritingTo: output)
        process.standardOutput = log
        process.standardError = log
        try process.run()
        try? log.close()
        let nginx = NginxProcess(process: process, port: port, folder: folder)
        do {
            let deadline = ContinuousClock.now + .seconds(15)
            while true {
                guard process.isRunning else { throw BenchError("nginx exited: \(nginx.logs)") }
                guard ContinuousClock.now < deadline else { throw BenchError("nginx did not answer within 15 s: \(nginx.logs)") }
                if let reply = try? await HTTP.request(port: port, .GET, "/ready"), reply.status == 204, nginx.workers.count == 2 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            for pid in [process.processIdentifier] + nginx.workers { Priority.level(pid) }
        } catch {
            nginx.stop(removingFolder: false)
            throw error
        }
        return nginx
    }

    /// A loopback port nothing listens on now (bound and released).
    static func freePort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        try await channel.close()
        guard port > 0 else { throw BenchError("no free port") }
        return port
    }

    /// The end of nginx's error log and output, for a failure's message.
    var logs: String {
        ["error.log", "output.log"].compactMap { try? String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8) }
            .joined(separator: "\n").split(separator: "\n").suffix(8).joined(separator: " | ")
    }

    /// The worker processes: children of the master that are nginx.
    var workers: [Int32] {
        let master = process.processIdentifier
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let stat = Self.processStat(pid) else { return false }
            return stat.name == "nginx" && stat.parent == master
        }
    }

    /// A process's name and parent, from `/proc/PID/stat` (the name is in parentheses and may hold spaces).
    static func processStat(_ pid: Int32) -> (name: String, parent: Int32)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 1, let parent = Int32(fields[1]) else { return nil }
        return (String(text[text.index(after: open)..<close]), parent)
    }

    /// Resident memory of the master and its workers, summed.
    var rssKiB: Int { ([process.processIdentifier] + workers).reduce(0) { $0 + BridgeProcess.rssKiB($1) } }

    /// Proportional memory of the master and its workers, summed (shared pages, such as nchan's
    /// shared-memory zone, counted once rather than once per process as RSS does).
    var pssKiB: Int {
        ([process.processIdentifier] + workers).reduce(0) { total, pid in
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8),
                let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Pss:") })
            else { return total }
            return total + (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0)
        }
    }

    /// SIGTERM (nginx's fast shutdown), up to 5 s for the master to exit, then SIGKILL to it and to
    /// any worker left; removes the folder.
    func stop(removingFolder: Bool = true) {
        let workers = self.workers
        if process.isRunning { process.terminate() }
        let deadline = ContinuousClock.now + .seconds(5)
        while process.isRunning, ContinuousClock.now < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        // Workers are gone with a master that shut down; after a SIGKILL they may be left.
        let workerDeadline = ContinuousClock.now + .seconds(2)
        while workers.contains(where: { Self.processStat($0)?.name == "nginx" }), ContinuousClock.now < workerDeadline { usleep(20_000) }
        for pid in workers where Self.processStat(pid)?.name == "nginx" { kill(pid, SIGKILL) }
        if removingFolder { try? FileManager.default.removeItem(at: folder) }
    }
}
