import Foundation
import PackagePlugin

/// Records the commit the bridge is built from (`git rev-parse --short HEAD`, `-modified` when
/// tracked files differ from it, `unknown` without git or a repository, as in a container build
/// whose context leaves `.git` out) as `BuildInfo.commit`, before each build.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "BuildCommit.swift")
        let root = context.package.directoryURL.path
        let script = """
            c=$(git -C '\(root)' rev-parse --short HEAD 2>/dev/null || echo unknown)
            case "$c" in *[!0-9a-f]*) c=unknown ;; esac
            if [ "$c" != unknown ] && [ -n "$(git -C '\(root)' status --porcelain --untracked-files=no 2>/dev/null | head -c 1)" ]; then c="$c-modified"; fi
            printf 'extension BuildInfo {\\n    /// The commit this binary was built from.\\n    package static let commit = "%s"\\n}\\n' "$c" > '\(output.path)'
            """
        return [
            .prebuildCommand(
                displayName: "Recording the commit of this build", executable: URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", script],
                outputFilesDirectory: context.pluginWorkDirectoryURL)
        ]
    }
}
