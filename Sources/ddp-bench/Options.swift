import Foundation

/// The harness's command line, checked: unknown options, missing values and numbers out of
/// range are refused with the usage, before anything starts.
struct BenchOptions {
    static let allParts = ["micro", "sse", "latency", "rest", "sessions", "recovery", "load", "public", "broadcaster", "nchan"]

    static let usage = """
        usage: ddp-bench [options]

        Starts the in-process demo DDP server and the bridge on loopback, drives bounded load,
        prints the figures and writes results.json, results.md and plot.svg to the output folder.
        At the end it compares each figure with the folder's previous results.json, if any.

          --smoke                 every part for a moment (the test command's run)
          --out DIR               output folder (default: bench-results)
          --only PARTS            comma-separated, of: \(allParts.joined(separator: ","))
          --sessions N            the sessions part opens N sessions (default: 1000 and 5000)
          --recovery-sessions N   sessions the recovery part brings back after the upstream's return
                                  (default: 10000)
          --load-sessions N       the load part opens and closes N sessions (default: 10000)
          --load-consumers N      slow consumers in the load part (default: 200)
          --load-rate N           changes/s each slow consumer's ticker makes (default: 50)
          --load-bound-mib N      the load part's resident memory bound (default: 512)
          --load-same-priority    run the load generator at the bridge's priority (default: nice 10)
          --public-readers N      readers of one public publication in the public part, and of nchan's
                                  channel in the nchan part (default: 10000)
          --public-changes N      changes the public part's aggregate run publishes (default: 3000;
                                  1 leaves the readers idle, for a memory profile)
          --public-latency-rate N changes/s of the public and broadcaster parts' latency runs
                                  (default: 100)
          --replot                write results.md and plot.svg again from results.json, nothing else
          -h, --help              this text

        The nchan part runs nginx with the nchan module (deploy/nchan/nginx.conf; Debian packages
        nginx and libnginx-mod-nchan, which scripts/bench.sh installs) as the public part's baseline;
        the smoke run skips it when they are missing.

        Environment: DDP_BENCH_WRAP runs the bridge process of the sessions part under a profiler
        (e.g. heaptrack); DDP_BENCH_SESSION_PARTS ("none", "sub" or "sub,stream") says what each
        session gets there.
        """

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    var smoke = false
    var replot = false
    var help = false
    var outputDirectory = "bench-results"
    var parts = Set(allParts)
    var sessions: Int?
    var recoverySessions: Int?
    var loadSessions: Int?
    var loadConsumers: Int?
    var loadRate: Int?
    var loadBoundMiB: Int?
    var loadSamePriority = false
    var publicReaders: Int?
    var publicChanges: Int?
    var publicLatencyRate: Int?

    init(_ arguments: [String]) throws(Invalid) {
        var rest = arguments[...]
        func value(_ name: String) throws(Invalid) -> String {
            guard let next = rest.popFirst(), !next.hasPrefix("--") else { throw Invalid(description: "\(name) needs a value") }
            return next
        }
        func count(_ name: String, _ most: Int) throws(Invalid) -> Int {
            let text = try value(name)
            guard let n = Int(text), n >= 1, n <= most else {
                throw Invalid(description: "\(name) must be a whole number from 1 to \(most), got '\(text)'")
            }
            return n
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--smoke": smoke = true
            case "--replot": replot = true
            case "-h", "--help": help = true
            case "--load-same-priority": loadSamePriority = true
            case "--out": outputDirectory = try value(argument)
            case "--only":
                let named = try value(argument).split(separator: ",").map(String.init)
                let unknown = named.filter { !Self.allParts.contains($0) }
                guard unknown.isEmpty, !named.isEmpty else {
                    throw Invalid(
                        description: "--only takes parts of \(Self.allParts.joined(separator: ",")); unknown: \(unknown.joined(separator: ","))")
                }
                parts = Set(named)
            case "--sessions": sessions = try count(argument, 100_000)
            case "--recovery-sessions": recoverySessions = try count(argument, 100_000)
            case "--load-sessions": loadSessions = try count(argument, 1_000_000)
            case "--load-consumers": loadConsumers = try count(argument, 10_000)
            case "--load-rate": loadRate = try count(argument, 100_000)
            case "--load-bound-mib": loadBoundMiB = try count(argument, 1 << 20)
            case "--public-readers": publicReaders = try count(argument, 19_000)
            case "--public-changes": publicChanges = try count(argument, 1_000_000)
            case "--public-latency-rate": publicLatencyRate = try count(argument, 10_000)
            default: throw Invalid(description: "unknown option '\(argument)'")
            }
        }
    }
}
