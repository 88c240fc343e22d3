extension Duration {
    /// The duration in seconds, as a floating-point number (package-wide: every module of
    /// ddp-bridge uses it, and it is not part of any module's public interface).
    package var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }
}
