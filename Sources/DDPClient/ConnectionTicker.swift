import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Drives every open connection's heartbeat and deadlines (``DDP/DDPConnectionStateMachine/tick(at:)``)
/// from one NIO repeated timer per tick interval for the whole process, and one Swift task per
/// round for all the connections it ticks: not a timer and a task per connection per tick (at
/// 10,000 sessions that was 10,000 task creations a second). A round that has not finished
/// when the next is due is not doubled: the next one is skipped.
final class ConnectionTicker: Sendable {
    private struct Round: Sendable {
        var clients: [ObjectIdentifier: WeakClient] = [:]
        var timer: RepeatedTask?
        var running = false
    }

    private struct WeakClient: @unchecked Sendable {
        weak var client: DDPClient?
    }

    /// The process's ticker, on the shared event loops.
    static let shared = ConnectionTicker(loop: MultiThreadedEventLoopGroup.singleton.any())

    private let loop: any EventLoop
    private let rounds = NIOLockedValueBox<[Duration: Round]>([:])

    init(loop: any EventLoop) { self.loop = loop }

    /// Ticks `client` every `interval` from now until ``remove(_:every:)``.
    func add(_ client: DDPClient, every interval: Duration) {
        rounds.withLockedValue { rounds in
            rounds[interval, default: Round()].clients[ObjectIdentifier(client)] = WeakClient(client: client)
            guard rounds[interval]!.timer == nil else { return }
            let amount = TimeAmount(interval)
            rounds[interval]!.timer = loop.scheduleRepeatedTask(initialDelay: amount, delay: amount) { [weak self] _ in
                self?.fire(interval)
            }
        }
    }

    func remove(_ client: DDPClient, every interval: Duration) {
        rounds.withLockedValue { rounds in
            rounds[interval]?.clients[ObjectIdentifier(client)] = nil
            if rounds[interval]?.clients.isEmpty == true {
                rounds[interval]?.timer?.cancel()
                rounds[interval] = nil
            }
        }
    }

    private func fire(_ interval: Duration) {
        let clients = rounds.withLockedValue { rounds -> [DDPClient]? in
            guard var round = rounds[interval], !round.running else { return nil }
            round.running = true
            rounds[interval] = round
            return round.clients.values.compactMap(\.client)
        }
        guard let clients else { return }
        Task {
            for client in clients { await client.tick() }
            rounds.withLockedValue { $0[interval]?.running = false }
        }
    }
}
