#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How the calling thread has been scheduled since it started, in nanoseconds: the time it ran,
/// and the time it was ready to run but waited for a core (Linux's
/// `/proc/thread-self/schedstat`); `nil` where that file cannot be read.
func threadScheduling() -> (running: Int64, waiting: Int64)? {
    let file = open("/proc/thread-self/schedstat", O_RDONLY)
    guard file >= 0 else { return nil }
    defer { close(file) }
    var bytes = [UInt8](repeating: 0, count: 96)
    let count = bytes.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
    guard count > 0 else { return nil }
    let fields = bytes[..<count].split(whereSeparator: { $0 == 32 || $0 == 10 }).prefix(2).map { Int64(String(decoding: $0, as: UTF8.self)) }
    guard fields.count == 2, let running = fields[0], let waiting = fields[1] else { return nil }
    return (running, waiting)
}
