import DDP
import Testing

@Suite struct DocumentCacheTests {
    @Test func toleratesAnAddForAHeldDocumentAsAReplacement() {
        var cache = DocumentCache()
        _ = cache.apply(.added(collection: "c", id: "1", fields: ["a": 1, "b": 2]))
        #expect(
            cache.apply(.added(collection: "c", id: "1", fields: ["a": 1, "c": 3]))?.change
                == .changed(collection: "c", id: "1", fields: ["c": 3], cleared: ["b"], previous: ["b": 2]))
        #expect(cache.apply(.added(collection: "c", id: "1", fields: ["a": 1, "c": 3]))?.change == nil)
    }

    @Test func orderedCollectionsFollowAddedBeforeAndMovedBefore() {
        var cache = DocumentCache()
        _ = cache.apply(.addedBefore(collection: "o", id: "a", fields: [:], before: nil))
        _ = cache.apply(.addedBefore(collection: "o", id: "c", fields: [:], before: nil))
        _ = cache.apply(.addedBefore(collection: "o", id: "b", fields: [:], before: "c"))
        #expect(cache.collections["o"]?.order == ["a", "b", "c"])
        #expect(cache.apply(.movedBefore(collection: "o", id: "a", before: nil))?.change == .moved(collection: "o", id: "a", before: nil))
        #expect(cache.collections["o"]?.order == ["b", "c", "a"])
        #expect(cache.apply(.movedBefore(collection: "o", id: "a", before: nil)) == nil)
        _ = cache.apply(.removed(collection: "o", id: "c"))
        #expect(cache.collections["o"]?.order == ["b", "a"])
    }

    @Test func differenceReplaysToTheNewState() {
        var old = DocumentCache()
        var new = DocumentCache()
        _ = old.apply(.added(collection: "c", id: "same", fields: ["x": 1]))
        _ = old.apply(.added(collection: "c", id: "edit", fields: ["x": 1, "y": 2]))
        _ = old.apply(.added(collection: "d", id: "drop", fields: [:]))
        _ = new.apply(.added(collection: "c", id: "same", fields: ["x": 1]))
        _ = new.apply(.added(collection: "c", id: "edit", fields: ["x": 5]))
        _ = new.apply(.added(collection: "e", id: "add", fields: ["z": .date(1)]))
        let diff = DocumentCache.difference(from: old, to: new)
        #expect(diff.count == 3)
        var replay = old
        for applied in diff {
            #expect(applied.before == old.document(applied.collection, applied.id), "\(applied.change)")
            #expect(applied.after == new.document(applied.collection, applied.id), "\(applied.change)")
            switch applied.change {
            case .added(let c, let id, let f): _ = replay.apply(.added(collection: c, id: id, fields: f))
            case .changed(let c, let id, let f, let cl, _): _ = replay.apply(.changed(collection: c, id: id, fields: f, cleared: cl))
            case .removed(let c, let id, _): _ = replay.apply(.removed(collection: c, id: id))
            case .moved(let c, let id, let b): _ = replay.apply(.movedBefore(collection: c, id: id, before: b))
            }
        }
        #expect(replay == new)
        #expect(DocumentCache.difference(from: new, to: new).isEmpty)
    }

    /// The cache derives each change once, with the document before and after it: what the
    /// session's batch and the stream events use without reading the cache again.
    @Test func eachChangeCarriesTheDocumentBeforeAndAfter() {
        var cache = DocumentCache()
        let messages: [ServerMessage] = [
            .added(collection: "c", id: "1", fields: ["a": 1, "b": 2]),
            .changed(collection: "c", id: "1", fields: ["a": 5], cleared: ["b"]),
            .changed(collection: "c", id: "1", fields: ["a": 5], cleared: ["missing"]),
            .added(collection: "c", id: "1", fields: ["z": 1]),
            .changed(collection: "c", id: "unknown", fields: ["n": 1], cleared: []),
            .addedBefore(collection: "o", id: "x", fields: ["k": 1], before: nil),
            .addedBefore(collection: "o", id: "y", fields: [:], before: "x"),
            .movedBefore(collection: "o", id: "x", before: "y"),
            .removed(collection: "c", id: "1"),
            .removed(collection: "c", id: "1")
        ]
        for message in messages {
            let before = cache
            let applied = cache.apply(message)
            guard let applied else {
                #expect(before == cache, "nothing changed: \(message)")
                continue
            }
            #expect(applied.before == before.document(applied.collection, applied.id), "\(message)")
            #expect(applied.after == cache.document(applied.collection, applied.id), "\(message)")
        }
        #expect(cache.document("c", "unknown") == ["n": 1])
        #expect(cache.collections["o"]?.order == ["x", "y"])
    }
}
