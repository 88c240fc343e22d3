import ArgumentParser
import Bridge

@main
struct DDPBridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ddp-bridge",
        abstract: "Expose a Meteor application's DDP data as REST and Server-Sent Events.",
        discussion: """
            Status: sessions and REST work (demo mode serves them); Server-Sent Events, metrics
            and the web console are not built yet.
            """,
        version: BridgeApplication.version,
        subcommands: [DemoCommand.self, WatchCommand.self],
        defaultSubcommand: DemoCommand.self
    )
}
