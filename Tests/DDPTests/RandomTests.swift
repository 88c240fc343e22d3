import DDP
import Testing

@Suite struct RandomTests {
    /// Transcript 07: Meteor's insert id for randomSeed "0123456789abcdef0123".
    @Test func seededInsertIDMatchesMeteor() {
        var random = AleaRandom(randomSeed: "0123456789abcdef0123", stream: "/collection/tasks")
        #expect(random.id() == "devBuvC559TzDB3E9")
    }

    @Test func seededStreamsAreReproducibleAndDistinct() {
        var a = AleaRandom(seeds: ["seed", "x"])
        var b = AleaRandom(seeds: ["seed", "x"])
        var c = AleaRandom(seeds: ["seed", "y"])
        let first = (0..<5).map { _ in a.fraction() }
        #expect(first == (0..<5).map { _ in b.fraction() })
        #expect(first != (0..<5).map { _ in c.fraction() })
        #expect(first.allSatisfy { $0 >= 0 && $0 < 1 })
    }

    @Test func secureIDsUseMeteorsAlphabets() {
        let alphabet = Set(MeteorRandom.unmistakableCharacters)
        let ids = (0..<200).map { _ in MeteorRandom.id() }
        #expect(ids.allSatisfy { $0.count == 17 && $0.allSatisfy(alphabet.contains) })
        #expect(Set(ids).count == ids.count)
        let secret = MeteorRandom.secret()
        #expect(secret.count == 43)
        #expect(MeteorRandom.randomSeed().count == 20)
        #expect(MeteorRandom.bytes(32) != MeteorRandom.bytes(32))
    }

    /// Transcript 10: the digest of "secret" that Meteor's client sends.
    @Test func passwordDigest() {
        #expect(SHA256Digest.hex("secret") == "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b")
        #expect(SHA256Digest.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            LoginRequest.password(user: .username("alice"), password: "secret").parameter == [
                "user": ["username": "alice"],
                "password": ["digest": "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b", "algorithm": "sha-256"]
            ])
    }
}
