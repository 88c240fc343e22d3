import Foundation

extension NchanBench {
    /// The part's figures, section "nchan", with the bridge's public figures of the same run as baseline when there are some.
    static func figures(_ result: Result, rate: Int, count: Int, bridge: PublicBench.Result?) -> [Figure] {
        let setting = "\(result.readers) readers of one channel, \(count) messages posted at \(rate)/s"
        let delivery = result.delivery
        let sizes = "\(result.dataBytes) B of data each" + (bridge?.eventDataBytes.map { " (the bridge's ticker events: \($0) B)" } ?? "")
        var figures = [
            Figure(
                "nchan", "opening nchan readers", result.openRate, "readers/s", baseline: bridge.map { _ in "bridge" },
                baselineValue: bridge?.openRate, note: setting),
            Figure(
                "nchan", "memory per idle nchan reader", result.kibPerReader, "KiB", baseline: bridge.map { _ in "bridge" },
                baselineValue: bridge?.kibPerReader,
                note: String(
                    format: "RSS of nginx's master and workers %d → %d MiB over %d readers; proportional (PSS) growth %.1f KiB per reader",
                    result.rssBeforeKiB / 1024, result.rssAfterKiB / 1024, result.readers - 1, result.pssKibPerReader)),
            Figure(
                "nchan", "aggregate delivery to all readers", result.aggregate, "events/s", baseline: bridge.map { _ in "bridge" },
                baselineValue: bridge?.aggregate,
                note: "\(delivery.events) events in \(String(format: "%.1f", delivery.seconds)) s; every reader got every message: "
                    + "\(result.everyReaderGotEverything) (\(delivery.complete) of \(result.readers) complete, \(delivery.closed) streams ended); "
                    + "\(result.published) posted in \(String(format: "%.1f s (%.0f/s)", result.publishSeconds, Double(result.published) / max(result.publishSeconds, 0.001))), "
                    + "one after another on one connection, \(sizes)")
        ]
        for p in [50.0, 99.0] {
            figures.append(
                Figure(
                    "nchan", "latency p\(Int(p)), sampled readers", Stats.percentile(delivery.latencies, p), "ms",
                    baseline: bridge.map { _ in "bridge" }, baselineValue: bridge.map { Stats.percentile($0.latencies, p) },
                    note: "\(delivery.latencies.count) samples, from the post's start to a reader's receipt"))
        }
        return figures
    }

    /// The bridge's latency at the rate nchan achieved, beside nchan's (section "nchan").
    static func sameRateFigures(bridge: PublicBench.Result, nchan: Result, rate: Int) -> [Figure] {
        [50.0, 99.0].map { p in
            Figure(
                "nchan", "bridge latency p\(Int(p)) at nchan's achieved rate (\(rate)/s)", Stats.percentile(bridge.latencies, p), "ms",
                baseline: "nchan", baselineValue: Stats.percentile(nchan.delivery.latencies, p),
                note: "\(bridge.latencies.count) samples from \(bridge.readers) readers; every reader got every event: "
                    + "\(bridge.everyReaderGotEverything)")
        }
    }

    /// The bridge's p99 at nchan's achieved rate must not exceed nchan's, every reader complete.
    static func sameRateTarget(bridge: PublicBench.Result, nchan: Result, rate: Int) -> Target {
        let (ours, theirs) = (Stats.percentile(bridge.latencies, 99), Stats.percentile(nchan.delivery.latencies, 99))
        return Target(
            name: "p99 latency to \(Report.number(Double(bridge.readers))) public readers at nchan's achieved rate (\(rate)/s) vs nchan",
            goal: "≤ nchan's p99, no reader cut",
            measured: String(
                format: "%.1f ms vs %.1f ms%@", ours, theirs, bridge.everyReaderGotEverything ? "" : "; NOT every reader got every event"),
            score: bridge.everyReaderGotEverything ? max(theirs, 0.01) / max(ours, 0.01) : 0)
    }

    /// The bridge's public figures beside nchan's: "not measured", with the reason, when either is missing.
    /// The bridge may merge changes that queue for a reader into one event; nchan sends every message: the delivery
    /// target says how many events each reader got of how many changes.
    static func comparison(bridge: PublicBench.Result?, nchan: Result?, readers: Int, count: Int, missing reason: String?) -> [Target] {
        let deliveryName = "aggregate delivery to \(Report.number(Double(readers))) public readers vs nchan"
        let memoryName = "memory per idle public reader vs nchan"
        guard let bridge, let nchan else {
            let why = reason ?? (bridge == nil ? "the public part did not run in this process" : "nchan did not run")
            return [
                Target(name: deliveryName, goal: "≥ 5× nchan", measured: "not measured: \(why)", score: 0),
                Target(name: memoryName, goal: "≤ nchan's", measured: "not measured: \(why)", score: 0)
            ]
        }
        let ratio = nchan.aggregate > 0 ? bridge.aggregate / nchan.aggregate : 0
        let perReader = (bridge.events / max(bridge.readers, 1), nchan.delivery.events / max(nchan.readers, 1))
        return [
            Target(
                name: deliveryName, goal: "≥ 5× nchan",
                measured: "\(Report.number(bridge.aggregate)) vs \(Report.number(nchan.aggregate)) events/s (\(String(format: "%.2f", ratio))×); "
                    + "events per reader for \(Report.number(Double(count))) changes: \(perReader.0) vs \(perReader.1)",
                score: ratio / 5),
            Target(
                name: memoryName, goal: "≤ nchan's", measured: String(format: "%.1f KiB vs %.1f KiB", bridge.kibPerReader, nchan.kibPerReader),
                score: max(nchan.kibPerReader, 0.01) / max(bridge.kibPerReader, 0.01))
        ]
    }
}
