import Foundation

/// Writes results.json, results.md and plot.svg, each with the date, commit and machine.
enum Report {
    struct Document: Codable {
        let date: String
        let commit: String
        let machine: String
        let smoke: Bool
        let figures: [Figure]
        let targets: [Target]
    }

    static var machine: String {
        let cpu =
            (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown CPU"
        return "\(ProcessInfo.processInfo.activeProcessorCount) cores (\(cpu)), \(ProcessInfo.processInfo.physicalMemory >> 30) GiB"
    }

    static func write(figures: [Figure], targets: [Target], smoke: Bool, to folder: String) throws {
        let date = ISO8601DateFormatter().string(from: Date())
        let commit = ProcessInfo.processInfo.environment["GIT_COMMIT"] ?? "unknown"
        try write(Document(date: date, commit: commit, machine: machine, smoke: smoke, figures: figures, targets: targets), to: folder)
    }

    /// Writes the Markdown and the plot again from a folder's results.json (`--replot`).
    static func replot(_ folder: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: folder).appendingPathComponent("results.json"))
        try write(try JSONDecoder().decode(Document.self, from: data), to: folder)
    }

    /// The folder's results.json before this run overwrites it, if there is one that reads.
    static func previous(_ folder: String) -> Document? {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: folder).appendingPathComponent("results.json")) else { return nil }
        return try? JSONDecoder().decode(Document.self, from: data)
    }

    /// Each figure of this run beside the same figure of the previous run, as a ratio.
    static func comparison(_ previous: Document, _ figures: [Figure]) -> String {
        let before = Dictionary(previous.figures.map { ("\($0.section)/\($0.name)", $0) }, uniquingKeysWith: { first, _ in first })
        var out = "Against the previous results.json (\(previous.date), commit `\(previous.commit)`\(previous.smoke ? ", a smoke run" : "")):\n\n"
        out += "| section | figure | before | now | now ÷ before |\n|---|---|---:|---:|---:|\n"
        var compared = 0
        for figure in figures {
            guard let old = before["\(figure.section)/\(figure.name)"], old.unit == figure.unit else { continue }
            compared += 1
            let ratio = old.value == 0 ? "—" : String(format: "%.2f×", figure.value / old.value)
            out += "| \(figure.section) | \(figure.name) | \(number(old.value)) \(old.unit) | \(number(figure.value)) \(figure.unit) | \(ratio) |\n"
        }
        return compared == 0 ? "No figure of this run was in the previous results.json.\n" : out
    }

    static func write(_ document: Document, to folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(document).write(to: URL(fileURLWithPath: folder).appendingPathComponent("results.json"))
        try markdown(document).write(toFile: folder + "/results.md", atomically: true, encoding: .utf8)
        try plot(document).write(toFile: folder + "/plot.svg", atomically: true, encoding: .utf8)
    }

    static func number(_ value: Double) -> String {
        if value >= 1000 {
            let formatter = NumberFormatter()
            formatter.numberStyle = .decimal
            formatter.maximumFractionDigits = 0
            return formatter.string(from: NSNumber(value: value)) ?? String(Int(value))
        }
        return String(format: value >= 10 ? "%.1f" : "%.2f", value)
    }

    static func markdown(_ document: Document) -> String {
        var out =
            "Benchmarks \(document.smoke ? "(smoke run: figures meaningless) " : "")— \(document.date), commit `\(document.commit)`, \(document.machine)\n\n"
        if !document.targets.isEmpty {
            out += "| target | goal | measured | met |\n|---|---|---|---|\n"
            for target in document.targets {
                let met = target.met ? "yes" : target.measured.hasPrefix("not measured") ? "not measured" : "**no**"
                out += "| \(target.name) | \(target.goal) | \(target.measured) | \(met) |\n"
            }
            out += "\n"
        }
        out += "| section | figure | value | vs baseline | note |\n|---|---|---:|---:|---|\n"
        for figure in document.figures {
            let ratio = figure.ratio.map { String(format: "%.2f× %@", $0, figure.baseline ?? "") } ?? ""
            out += "| \(figure.section) | \(figure.name) | \(number(figure.value)) \(figure.unit) | \(ratio) | \(figure.note ?? "") |\n"
        }
        return out
    }

    /// Each target's score (measured over goal; 1 = just met) as a horizontal bar, the goal as a line.
    static func plot(_ document: Document) -> String {
        let width = 1040.0
        let rowHeight = 34.0
        let left = 420.0
        let right = 300.0
        let height = 70 + rowHeight * Double(max(document.targets.count, 1))
        let maxScore = max(2, (document.targets.map(\.score).max() ?? 1).rounded(.up))
        let scale = (width - left - right) / maxScore
        func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="#ffffff"/>
            <text x="10" y="20" font-size="14" font-weight="bold">ddp-bridge targets: measured ÷ goal (≥ 1 meets it)</text>
            <text x="10" y="38" fill="#555">\(escape(document.date)) · commit \(escape(document.commit)) · \(escape(document.machine))</text>

            """
        for (i, target) in document.targets.enumerated() {
            let y = 52 + Double(i) * rowHeight
            let barWidth = min(target.score, maxScore) * scale
            svg += """
                <text x="\(Int(left - 8))" y="\(Int(y + 17))" text-anchor="end">\(escape(target.name))</text>
                <rect x="\(Int(left))" y="\(Int(y + 5))" width="\(Int(max(barWidth, 1)))" height="18" fill="\(target.met ? "#2e7d32" : "#c62828")"/>
                <text x="\(Int(left + max(barWidth, 1) + 4))" y="\(Int(y + 18))">\(escape(target.measured)) (goal \(escape(target.goal)))</text>

                """
        }
        let goalX = Int(left + scale)
        svg += """
            <line x1="\(goalX)" y1="46" x2="\(goalX)" y2="\(Int(height - 8))" stroke="#000" stroke-dasharray="4 3"/>
            </svg>

            """
        return svg
    }
}
