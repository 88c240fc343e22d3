import DDP
import Testing

/// Durations turned into whole units without a floating-point conversion that could trap.
@Suite struct DurationTests {
    @Test func wholeUnitsTruncateAndSaturate() {
        #expect(Duration.milliseconds(1_500).wholeSeconds == 1)
        #expect(Duration.milliseconds(1_500).wholeMilliseconds == 1_500)
        #expect(Duration.microseconds(2_999).wholeMilliseconds == 2)
        #expect(Duration.seconds(-3).wholeMilliseconds == -3_000)
        #expect(Duration.seconds(Int64.max).wholeMilliseconds == .max)
        #expect(Duration.seconds(Int64.min).wholeMilliseconds == .min)
        #expect(Duration.seconds(Int64.max).wholeSeconds == .max)
    }
}
