import Foundation

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One measured figure, with the baseline it is compared against when it has one.
struct Figure: Codable, Sendable {
    let section: String
    let name: String
    let value: Double
    let unit: String
    var baseline: String?
    var baselineValue: Double?
    var ratio: Double?
    var note: String?

    init(
        _ section: String, _ name: String, _ value: Double, _ unit: String,
        baseline: String? = nil, baselineValue: Double? = nil, note: String? = nil
    ) {
        self.section = section
        self.name = name
        self.value = value
        self.unit = unit
        self.baseline = baseline
        self.baselineValue = baselineValue
        self.ratio = baselineValue.map { $0 > 0 ? value / $0 : 0 }
        self.note = note
    }
}

/// A performance target, judged on a measured figure.
struct Target: Codable, Sendable {
    let name: String
    let goal: String
    let measured: String
    /// Measured over goal, oriented so that ≥ 1 meets it (for a ceiling: goal over measured).
    let score: Double
    var met: Bool { score >= 1 }
}

extension Target {
    /// A ratio that must reach `goal` (0.85 for "≥ 85%"), shown as a percentage.
    static func ratio(_ name: String, _ value: Double, atLeast goal: Double, decimals: Int = 0) -> Target {
        Target(
            name: name, goal: "≥ \(Int((goal * 100).rounded()))%", measured: String(format: "%.\(decimals)f%%", value * 100),
            score: value / goal)
    }
}

enum Stats {
    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        return values.sorted()[values.count / 2]
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let index = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))
        return sorted[index]
    }
}
