import DDP
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import Bridge

/// Who a client is, for the limits: an IPv6 client by its network, not by each address it may
/// use in it.
@Suite struct ClientIdentityTests {
    static func key(_ address: String, _ prefix: Int = 64) -> String { ClientKey(address: address, ipv6Prefix: prefix).description }

    @Test func anIPv6ClientIsKeyedByItsNetworkAndAnIPv4ClientByItsAddress() {
        // One /64, written every way: one client.
        let sameNetwork = ["2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:DB8:1:2::abcd", "[2001:db8:1:2::9]", "2001:0db8:0001:0002::1"]
        #expect(Set(sameNetwork.map { Self.key($0) }) == ["2001:db8:1:2:0:0:0:0/64"])
        #expect(Self.key("2001:db8:1:3::1") != Self.key("2001:db8:1:2::1"), "the next /64 is another client")
        // The prefix is a setting: a /48 site, or every address apart.
        #expect(Self.key("2001:db8:1:2::1", 48) == Self.key("2001:db8:1:ffff::1", 48))
        #expect(Self.key("2001:db8:1:2::1", 128) != Self.key("2001:db8:1:2::2", 128))
        #expect(Self.key("2001:db8:1:2::1", 60) == "2001:db8:1:0:0:0:0:0/60")
        #expect(Self.key("2001:db8:1:1f::1", 60) == "2001:db8:1:10:0:0:0:0/60", "a prefix inside a group of bits")
        // IPv4 by the address; an IPv4-mapped IPv6 address is its IPv4 address.
        #expect(Self.key("203.0.113.7") == "203.0.113.7")
        #expect(Self.key("203.0.113.8") != Self.key("203.0.113.7"))
        #expect(Self.key("::ffff:203.0.113.7") == "203.0.113.7")
        // Text that is no address is its own key.
        #expect(Self.key("unknown") == "unknown")
    }

    /// The connection limit keys a peer the same way (the test cannot connect from several IPv6
    /// addresses, so the admission is asked directly).
    @Test func connectionsFromOneIPv6NetworkShareTheirLimit() {
        var configuration = BridgeConfiguration(upstream: "ws://127.0.0.1:1/websocket")
        configuration.maxConnections = 100
        configuration.maxConnectionsPerAddress = 2
        let admission = ConnectionAdmission(limits: configuration.admissionLimits, budget: MemoryBudget(configuration.memoryBudgetSettings)) { 0 }
        #expect(admission.admit("2001:db8:1:2::1") == .admitted)
        #expect(admission.admit("2001:db8:1:2::2") == .admitted)
        #expect(admission.admit("2001:db8:1:2::3") == .tooManyFromAddress)
        #expect(admission.admit("2001:db8:1:3::1") == .admitted, "another /64")
        admission.release("2001:db8:1:2::1")
        #expect(admission.admit("2001:db8:1:2::4") == .admitted, "a place given back is the network's")
    }

    /// Anyone with a /64 rotated past every per-address limit: each address was a client of its
    /// own. Through HTTP, behind a trusted proxy (the only way to present several IPv6 client
    /// addresses from one test), sessions from three addresses of one /64 share its limit.
    @Test func sessionsFromOneIPv6NetworkShareTheirLimit() async throws {
        try await BridgeHarness.run(configure: {
            $0.trustedProxies = [IPRange("127.0.0.1")!]
            $0.maxSessionsPerAddress = 2
        }) { h in
            func session(from address: String) async throws -> BridgeHarness.Reply {
                try await h.request(.post, "/v1/sessions", body: "{}", headers: [.init("X-Forwarded-For")!: address])
            }
            #expect(try await session(from: "2001:db8:1:2::1").status == .created)
            #expect(try await session(from: "2001:db8:1:2::2").status == .created)
            expectError(try await session(from: "2001:db8:1:2:abcd::3"), .tooManyRequests, "too-many-sessions")
            #expect(try await session(from: "2001:db8:1:3::1").status == .created, "another /64 is another client")
        }
    }
}
