/// The name a mistyped one most likely meant, for "did you mean" answers: the candidate within a
/// small edit distance (insertions, deletions, substitutions, swaps of two neighbours; case
/// ignored), the nearest first, ties to the earlier candidate. Only names of at most 64
/// characters are compared, so one comparison costs at most 64 × 64 steps whatever a request
/// carries.
public enum ClosestName {
    /// The candidate `name` most likely meant, or `nil` when none is close (a short name must be
    /// nearly right: at most one edit up to 5 characters, two beyond). `name` itself is never
    /// suggested.
    public static func suggestion(for name: String, among candidates: some Sequence<String>) -> String? {
        let typed = Array(name.lowercased().unicodeScalars)
        guard !typed.isEmpty, typed.count <= 64 else { return nil }
        let allowed = typed.count <= 5 ? 1 : 2
        var best: (name: String, distance: Int)?
        for candidate in candidates where candidate != name {
            let other = Array(candidate.lowercased().unicodeScalars)
            guard abs(other.count - typed.count) <= allowed, other.count <= 64 else { continue }
            let distance = editDistance(typed, other)
            if distance <= allowed, distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
        }
        return best?.name
    }

    /// Optimal string alignment distance: Levenshtein's, with a swap of two neighbours as one edit.
    static func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { current[j] = min(current[j], before[j - 2] + 1) }
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }
}
