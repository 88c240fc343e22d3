extension Duration {
    /// The duration in seconds, as a floating-point number (package-wide: every module of
    /// ddp-bridge uses it, and it is not part of any module's public interface).
    package var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }

    /// Whole seconds, truncated toward zero (no floating point, so nothing to trap on).
    package var wholeSeconds: Int64 { components.seconds }

    /// Whole milliseconds, truncated toward zero; saturates at `Int64`'s bounds instead of
    /// trapping (a duration holds up to about 2.9e11 years, milliseconds in `Int64` 2.9e8).
    package var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        let (sum, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        return overflow || overflowAgain ? (seconds < 0 ? .min : .max) : sum
    }

    /// Whole nanoseconds; saturates at `Int64`'s bounds instead of trapping.
    package var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow || overflowAgain ? (seconds < 0 ? .min : .max) : sum
    }
}
