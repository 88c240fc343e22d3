/// Meteor's seeded generator (Johannes Baagøe's Alea, as in Meteor's `random` package),
/// so that ids generated from a method's `randomSeed` match the ones Meteor generates.
public struct AleaRandom: Sendable {
    private var s0: Double
    private var s1: Double
    private var s2: Double
    private var c: Double = 1

    /// Seeds as Meteor's `Random.createWithSeeds(...seeds)`.
    public init(seeds: [String]) {
        var mash = Mash()
        s0 = mash.mash(" ")
        s1 = mash.mash(" ")
        s2 = mash.mash(" ")
        for seed in seeds {
            s0 -= mash.mash(seed)
            if s0 < 0 { s0 += 1 }
            s1 -= mash.mash(seed)
            if s1 < 0 { s1 += 1 }
            s2 -= mash.mash(seed)
            if s2 < 0 { s2 += 1 }
        }
    }

    /// The generator for one named stream of a method's seed (`DDP.randomStream(name)`),
    /// e.g. `"/collection/tasks"` for the ids a collection insert makes.
    public init(randomSeed: String, stream: String) {
        self.init(seeds: [randomSeed, stream])
    }

    /// A number in [0, 1).
    public mutating func fraction() -> Double {
        let t = 2_091_639 * s0 + c * 2.3283064365386963e-10
        s0 = s1
        s1 = s2
        c = Double(Int32(truncatingIfNeeded: Int64(t)))
        s2 = t - c
        return s2
    }

    public mutating func string(count: Int, alphabet: [Character]) -> String {
        var out = ""
        out.reserveCapacity(count)
        for _ in 0..<count {
            out.append(alphabet[Int((fraction() * Double(alphabet.count)).rounded(.down))])
        }
        return out
    }

    /// A Meteor-style id: 17 characters from the unmistakable alphabet.
    public mutating func id(count: Int = 17) -> String {
        string(count: count, alphabet: MeteorRandom.unmistakableCharacters)
    }

    private struct Mash {
        var n: Double = 0xefc8_249d

        mutating func mash(_ data: String) -> Double {
            for unit in data.utf16 {
                n += Double(unit)
                var h = 0.02519603282416938 * n
                n = Self.toUInt32(h)
                h -= n
                h *= n
                n = Self.toUInt32(h)
                h -= n
                n += h * 0x1_0000_0000
            }
            return Self.toUInt32(n) * 2.3283064365386963e-10
        }

        /// JavaScript's `x >>> 0` for the non-negative values Mash produces.
        static func toUInt32(_ x: Double) -> Double {
            let t = x.rounded(.towardZero).truncatingRemainder(dividingBy: 4_294_967_296)
            return t < 0 ? t + 4_294_967_296 : t
        }
    }
}
