import Testing

@testable import Bridge

@Suite struct StreamFilterTests {
    @Test func oneCollectionSeveralOrAnyAdmitTheirOwn() {
        let one = StreamFilter(collections: ["ticks"])
        #expect(one.admits(collection: "ticks", id: "a"))
        #expect(!one.admits(collection: "tick", id: "a") && !one.admits(collection: "ticks2", id: "a"))
        let several = StreamFilter(collections: ["tasks", "lists"])
        #expect(several.admits(collection: "tasks", id: "a") && several.admits(collection: "lists", id: "a"))
        #expect(!several.admits(collection: "ticks", id: "a"))
        #expect(StreamFilter().admits(collection: "anything", id: "a"))
        #expect(!StreamFilter(collections: []).admits(collection: "tasks", id: "a"), "an empty set admits nothing")
        let document = StreamFilter(collections: ["tasks"], documentID: "t1")
        #expect(document.admits(collection: "tasks", id: "t1") && !document.admits(collection: "tasks", id: "t2"))
    }

    @Test func changingTheCollectionsChangesWhatIsAdmitted() {
        var filter = StreamFilter(collections: ["tasks"])
        filter.collections = ["lists"]
        #expect(filter.admits(collection: "lists", id: "a") && !filter.admits(collection: "tasks", id: "a"))
        filter.collections = ["lists", "tasks"]
        #expect(filter.admits(collection: "lists", id: "a") && filter.admits(collection: "tasks", id: "a"))
        filter.collections = nil
        #expect(filter.admits(collection: "other", id: "a"))
    }
}
