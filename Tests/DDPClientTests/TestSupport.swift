import DDP
import DDPClient
import DDPServer
import Logging

/// A demo-data DDP server on a free loopback port.
func startDemoServer(_ configure: (inout DDPServerConfiguration) -> Void = { _ in }) async throws -> LocalDDPServer {
    var configuration = DemoDataSet.configuration
    configure(&configuration)
    let server = LocalDDPServer(configuration: configuration, logger: Logger(label: "test-server"))
    try await DemoDataSet.seed(server.core)
    try await server.start()
    return server
}
