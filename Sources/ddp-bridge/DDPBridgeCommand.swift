import ArgumentParser
import Bridge

@main
struct DDPBridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ddp-bridge",
        abstract: "Expose a Meteor application's DDP data as REST and Server-Sent Events.",
        discussion: """
            Status: the DDP client, the in-process demo DDP server and live change output work;
            the HTTP surface (REST and SSE) is not built yet.
            """,
        version: Bridge.version,
        subcommands: [DemoCommand.self, WatchCommand.self],
        defaultSubcommand: DemoCommand.self
    )
}
