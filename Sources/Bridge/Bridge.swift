/// The bridge between HTTP clients and an upstream DDP server: sessions that each own one
/// ``DDPClient/DDPClient`` connection, the REST routes and the Server-Sent Events streams.
///
/// Status: the sessions, REST and SSE layers are the next issues; this module holds what is
/// shared with the executable so far.
public enum Bridge {
    /// The product's version, reported by `ddp-bridge --version`.
    public static let version = "0.1.0"
}
