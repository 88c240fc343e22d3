/// What each metric family means, as the `# HELP` line of `/metrics` says it (the exposition's
/// text format: one `# HELP name text` before the family's `# TYPE`). The metrics are made
/// through swift-metrics, whose labels carry no help, so the text is added to the scrape from
/// this table; `MetricsTests` checks that every family a running bridge exports has one.
/// docs/OPERATIONS.md ("Metrics") says the same in more words.
enum MetricsHelp {
    static let text: [String: String] = [
        "ddp_bridge_build_info": "1, labelled with the version and commit running",
        "ddp_bridge_client_connections": "Client connections open",
        "ddp_bridge_client_connections_limit": "Client connections allowed at once (--max-connections in force)",
        "ddp_bridge_connections_refused_total": "Client connections refused, by reason (address: the per-address bound; total)",
        "ddp_bridge_event_loop_blocked_max_seconds": "Largest part of a tick's lateness its loop's thread neither ran nor could, since start",
        "ddp_bridge_event_loop_blocked_seconds": "Part of each event loop tick's lateness its thread was neither running nor runnable",
        "ddp_bridge_event_loop_held_max_seconds": "Largest part of an event loop tick's lateness its thread spent running, since start",
        "ddp_bridge_event_loop_held_seconds": "Part of each tick's lateness its loop's thread spent running (the bridge's work holding the loop)",
        "ddp_bridge_event_loop_lateness_max_seconds": "Largest lateness of an event loop's 20 ms tick since start",
        "ddp_bridge_event_loop_lateness_seconds": "How late each event loop ran a timer due every 20 ms",
        "ddp_bridge_failed_logins_total": "Logins refused",
        "ddp_bridge_http_requests_total": "HTTP requests answered, by route and status",
        "ddp_bridge_memory_budget_bytes": "The memory budget for documents held for clients",
        "ddp_bridge_memory_budget_stops_total": "Loads stopped by the memory budget or an address's share of it",
        "ddp_bridge_memory_budget_used_bytes": "Estimated bytes of documents held for clients",
        "ddp_bridge_method_duration_seconds": "Meteor method call latency, through the upstream",
        "ddp_bridge_public_events_delivered_total": "Events written to public readers",
        "ddp_bridge_public_events_dropped_total": "Events dropped for public readers cut as slow consumers",
        "ddp_bridge_public_readers": "Public readers open",
        "ddp_bridge_public_subscriptions": "Public subscriptions held upstream",
        "ddp_bridge_public_upstream_connections": "Upstream connections of the public pool, by state",
        "ddp_bridge_session_key_mismatches_total": "Stored sessions sealed with another --session-key",
        "ddp_bridge_session_store_errors_total": "Session store failures, by operation",
        "ddp_bridge_session_store_saves_total": "Sessions written to the session store",
        "ddp_bridge_session_store_up": "1 when the session store answers",
        "ddp_bridge_sessions": "Sessions held",
        "ddp_bridge_sessions_resumed_total": "Sessions resumed from the session store",
        "ddp_bridge_sse_events_delivered_total": "Events written to session streams",
        "ddp_bridge_sse_events_dropped_total": "Events dropped for session streams cut as slow consumers",
        "ddp_bridge_sse_streams": "Event streams open on sessions",
        "ddp_bridge_upstream_connections": "Upstream DDP connections of sessions, by state",
        "ddp_bridge_upstream_failures_total": "Failed attempts to reach the upstream, by cause",
        "ddp_bridge_upstream_ready": "1 when the readiness probe's upstream connection is up",
        "ddp_bridge_upstream_reconnects_total": "Upstream reconnects"
    ]

    /// The scrape with a `# HELP` line before each family's `# TYPE` line that has text here
    /// (unless the line before is that family's `# HELP` already). Pure.
    static func annotate(_ scrape: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(scrape.count + text.count * 80)
        var previous: ArraySlice<UInt8> = []
        for line in scrape.split(separator: 0x0A, omittingEmptySubsequences: false) {
            if let name = family(line, after: "# TYPE "), let help = text[name], family(previous, after: "# HELP ") != name {
                out += Array("# HELP \(name) \(help)\n".utf8)
            }
            out += line
            out.append(0x0A)
            previous = line
        }
        // The split gave the text's last newline an empty last line, which got one more.
        out.removeLast()
        return out
    }

    /// The family a `# TYPE` or `# HELP` line names (`nil` for another line).
    private static func family(_ line: ArraySlice<UInt8>, after prefix: String) -> String? {
        let marker = Array(prefix.utf8)
        guard line.starts(with: marker) else { return nil }
        return String(decoding: line.dropFirst(marker.count).prefix { $0 != 0x20 }, as: UTF8.self)
    }
}
