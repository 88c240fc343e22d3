import HashTreeCollections
import Testing

@testable import DDP

/// The index only narrows: its candidates, filtered by the whole selector, are exactly what a
/// scan of every document finds, whatever the documents, their changes and the selector.
@Suite struct FieldIndexTests {
    /// A seeded generator, so a failure names its case and can be run again.
    struct Dice {
        var seed: UInt64
        mutating func next(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(bound))
        }
    }

    /// Values of every kind, the awkward ones included: NaN, -0.0, null, arrays mixing kinds,
    /// objects, dates, booleans, strings whose order differs between scalars and UTF-16.
    static func value(_ dice: inout Dice) -> EJSON {
        switch dice.next(12) {
        case 0: .number(Double(dice.next(10)))
        case 1: .number(Double(dice.next(10)) + 0.5)
        case 2: .number(dice.next(3) == 0 ? .nan : -0.0)
        case 3: .string(["a", "b", "é", "e\u{301}", "z", "\u{FF61}", "\u{1F600}"][dice.next(7)])
        case 4: .bool(dice.next(2) == 0)
        case 5: .date(Double(dice.next(5)))
        case 6: .null
        case 7: .array([.number(Double(dice.next(10))), .string("b")])
        case 8: .array([.number(Double(dice.next(10))), .number(.nan)])
        case 9: ["k": .number(Double(dice.next(3)))]
        case 10: .array([])
        default: .number(Double(dice.next(10)))
        }
    }

    static func condition(_ dice: inout Dice) -> EJSON {
        let target = value(&dice)
        switch dice.next(8) {
        case 0: return target
        case 1: return ["$eq": target]
        case 2: return ["$in": .array([target, value(&dice)])]
        case 3: return ["$gt": target]
        case 4: return ["$gte": target]
        case 5: return ["$lt": target]
        case 6: return ["$lte": target]
        default: return ["$gte": target, "$lt": value(&dice)]
        }
    }

    @Test(arguments: 0..<40)
    func candidatesFilteredBySelectorAreWhatAScanFinds(seed: Int) throws {
        var dice = Dice(seed: UInt64(seed) &+ 7)
        var cache = DocumentCache()
        let t0 = ContinuousClock.now
        let fields = ["a", "b"]
        // Some documents, then an index, then changes the index must keep up with.
        for step in 0..<300 {
            let id = "d\(dice.next(60))"
            let field = fields[dice.next(2)]
            let message: ServerMessage =
                switch dice.next(6) {
                case 0, 1: .added(collection: "c", id: id, fields: EJSONObject([.init(key: field, value: Self.value(&dice))]))
                case 2, 3: .changed(collection: "c", id: id, fields: EJSONObject([.init(key: field, value: Self.value(&dice))]), cleared: [])
                case 4: .changed(collection: "c", id: id, fields: [:], cleared: [field])
                default: .removed(collection: "c", id: id)
                }
            _ = cache.apply(message)
            if step == 100 { _ = cache.indexed("c", fields: fields, at: t0) }
        }
        let indexed = cache.indexed("c", fields: fields, at: t0)
        let collection = try #require(indexed)
        // Kept by 200 changes, the index holds what one built now would.
        var fresh = DocumentCache.Collection()
        for (id, document) in collection.documents { fresh.documents[id] = document }
        for field in fields {
            let kept = try #require(collection.indexes[field])
            let built = fresh.index(field, at: t0)
            #expect(kept.entries.map(\.id) == built.entries.map(\.id), "field \(field), seed \(seed)")
            #expect(kept.entries.map(\.value) == built.entries.map(\.value), "field \(field), seed \(seed)")
            #expect(kept.unordered == built.unordered, "field \(field), seed \(seed)")
        }
        for _ in 0..<60 {
            var object: EJSONObject = ["a": Self.condition(&dice)]
            if dice.next(2) == 0 { object["b"] = Self.condition(&dice) }
            guard let selector = try? Selector(.object(object)) else { continue }
            let scanned = Set(collection.documents.filter { selector.matches($0.value) }.keys)
            guard let candidates = collection.candidates(for: selector) else {
                #expect(selector.indexableConditions.isEmpty, "an indexed condition gave no candidates: \(object)")
                continue
            }
            let found = Set(candidates.filter { id in collection.documents[id].map(selector.matches) ?? false })
            #expect(found == scanned, "seed \(seed), selector \(object): index \(found.sorted()), scan \(scanned.sorted())")
            if found != scanned { return }
        }
    }

    /// A random change to one of 60 documents of collection `c`.
    static func change(_ dice: inout Dice, fields: [String]) -> ServerMessage {
        let id = "d\(dice.next(60))"
        let field = fields[dice.next(fields.count)]
        switch dice.next(6) {
        case 0, 1: return .added(collection: "c", id: id, fields: EJSONObject([.init(key: field, value: Self.value(&dice))]))
        case 2, 3: return .changed(collection: "c", id: id, fields: EJSONObject([.init(key: field, value: Self.value(&dice))]), cleared: [])
        case 4: return .changed(collection: "c", id: id, fields: [:], cleared: [field])
        default: return .removed(collection: "c", id: id)
        }
    }

    /// An index built outside the cache's owner from a copy, while the cache goes on changing,
    /// and handed back: brought up to date, it holds what one built from the documents now would.
    @Test(arguments: 0..<40)
    func anIndexBuiltFromACopyWhileTheCacheChangesIsKeptUpToDate(seed: Int) throws {
        var dice = Dice(seed: UInt64(seed) &+ 11)
        var cache = DocumentCache()
        let t0 = ContinuousClock.now
        for _ in 0..<100 { _ = cache.apply(Self.change(&dice, fields: ["a", "b"])) }
        // A collection removed while empty and made again loses the build: add one that stays.
        _ = cache.apply(.added(collection: "c", id: "keep", fields: ["b": 1]))
        let started = cache.indexing("c", fields: ["a"], at: t0)
        let (copy, builds) = try #require(started)
        #expect(builds.map(\.field) == ["a"] && builds.allSatisfy(\.canBeKept))
        // A second query meanwhile builds its own, for itself only.
        let second = cache.indexing("c", fields: ["a"], at: t0)
        #expect(second?.builds.map(\.canBeKept) == [false])
        let index = FieldIndex(field: "a", documents: copy.documents, at: t0)
        for _ in 0..<100 { _ = cache.apply(Self.change(&dice, fields: ["a", "b"])) }
        let build = try #require(builds.first)
        let kept1 = cache.keep(index, in: "c", build: build, builtFrom: copy.documents, at: t0)
        let kept2 = cache.keep(index, in: "c", build: build, builtFrom: copy.documents, at: t0)
        #expect(kept1, "seed \(seed)")
        #expect(!kept2, "a build is kept once")
        for _ in 0..<100 { _ = cache.apply(Self.change(&dice, fields: ["a", "b"])) }
        let collection = try #require(cache.collections["c"])
        let kept = try #require(collection.indexes["a"])
        let built = FieldIndex(field: "a", documents: collection.documents, at: t0)
        #expect(kept.entries.map(\.id) == built.entries.map(\.id), "seed \(seed)")
        #expect(kept.entries.map(\.value) == built.entries.map(\.value), "seed \(seed)")
        #expect(kept.unordered == built.unordered, "seed \(seed)")
        // Later queries use it as it is: no build.
        let later = cache.indexing("c", fields: ["a"], at: t0)
        #expect(later?.builds.isEmpty == true)
    }

    /// A build whose collection changed past the bound, or that was taken as abandoned, is not kept.
    @Test func aBuildTooLongOrTooChangedIsNotKept() throws {
        var cache = DocumentCache()
        let t0 = ContinuousClock.now
        _ = cache.apply(.added(collection: "c", id: "x", fields: ["a": 1]))
        let started = cache.indexing("c", fields: ["a"], at: t0)
        let (copy, builds) = try #require(started)
        let index = FieldIndex(field: "a", documents: copy.documents, at: t0)
        for n in 0...PendingIndexBuild.maxChanges { _ = cache.apply(.added(collection: "c", id: "d\(n)", fields: ["a": .int(n)])) }
        let build = try #require(builds.first)
        let tooChanged = cache.keep(index, in: "c", build: build, builtFrom: copy.documents, at: t0)
        #expect(!tooChanged)
        #expect(cache.collections["c"]?.indexes["a"] == nil)
        // Abandoned: a build not handed back within its time is replaced by the next query's.
        let firstStart = cache.indexing("c", fields: ["a"], at: t0)
        let first = try #require(firstStart?.builds.first)
        let later = t0 + PendingIndexBuild.abandonedAfter + .seconds(1)
        let secondStart = cache.indexing("c", fields: ["a"], at: later)
        let second = try #require(secondStart?.builds.first)
        #expect(second.canBeKept)
        let documents = try #require(cache.collections["c"]?.documents)
        let fresh = FieldIndex(field: "a", documents: documents, at: later)
        let keptFirst = cache.keep(fresh, in: "c", build: first, builtFrom: documents, at: later)
        let keptSecond = cache.keep(fresh, in: "c", build: second, builtFrom: documents, at: later)
        #expect(!keptFirst)
        #expect(keptSecond)
    }

    @Test func aRangeFindsItsTypeClassOnlyAndEqualityItsValue() throws {
        var cache = DocumentCache()
        let values: [EJSON] = [1, 2, 3, "1", "2", .date(2), .bool(true), [2, "x"]]
        for (n, value) in values.enumerated() {
            _ = cache.apply(.added(collection: "c", id: "d\(n)", fields: ["a": value]))
        }
        let indexed = cache.indexed("c", fields: ["a"], at: .now)
        let collection = try #require(indexed)
        let index = try #require(collection.indexes["a"])
        #expect(index.candidates(.bounds(lower: .init(value: 2, inclusive: true), upper: nil)) == ["d1", "d2", "d7"])
        #expect(index.candidates(.bounds(lower: nil, upper: .init(value: "2", inclusive: false))) == ["d3"])
        #expect(index.candidates(.values([2])) == ["d1", "d7"], "an array is found by its elements")
        #expect(index.candidates(.values([.bool(true)])) == ["d6"])
    }

    @Test func unusedIndexesAreDroppedAndTheirNumberIsBounded() throws {
        var cache = DocumentCache()
        _ = cache.apply(.added(collection: "c", id: "x", fields: ["a": 1, "b": 2, "c": 3, "d": 4, "e": 5]))
        let t0 = ContinuousClock.now
        for (n, field) in ["a", "b", "c", "d", "e"].enumerated() { _ = cache.indexed("c", fields: [field], at: t0 + .seconds(n)) }
        #expect(cache.collections["c"]?.indexes.keys.sorted() == ["b", "c", "d", "e"], "at most four; the least recently used went")
        _ = cache.indexed("c", fields: ["e"], at: t0 + DocumentCache.indexIdleLimit + .seconds(4))
        #expect(cache.collections["c"]?.indexes.keys.sorted() == ["e"], "unused for the idle limit: dropped")
    }
}
