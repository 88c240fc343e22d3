import Foundation
import PackagePlugin

/// Records the commit the bridge is built from (`git rev-parse --short HEAD`, `-modified` when
/// tracked files differ from it) as `BuildInfo.commit`, before each build. Without git or a
/// repository (a container build, whose context leaves `.git` out) it reads `.build-commit` at the
/// package root, which the Dockerfile writes from its `GIT_COMMIT` build argument; `unknown` when
/// neither names a commit.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "BuildCommit.swift")
        let root = context.package.directoryURL.path
        let script = """
            c=$(git -C '\(root)' rev-parse --short HEAD 2>/dev/null || echo unknown)
            case "$c" in *[!0-9a-f]*) c=unknown ;; esac
            if [ "$c" = unknown ] && [ -r '\(root)/.build-commit' ]; then
                f=$(head -n 1 '\(root)/.build-commit' | tr -d ' \t\r')
                case "${f%-modified}" in '' | *[!0-9a-f]*) ;; *) [ ${#f} -le 49 ] && c=$f ;; esac
            elif [ "$c" != unknown ] && [ -n "$(git -C '\(root)' status --porcelain --untracked-files=no 2>/dev/null | head -c 1)" ]; then c="$c-modified"; fi
            printf 'extension BuildInfo {\\n    /// The commit this binary was built from.\\n    package static let commit = "%s"\\n}\\n' "$c" > '\(output.path)'
            """
        return [
            .prebuildCommand(
                displayName: "Recording the commit of this build", executable: URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", script],
                outputFilesDirectory: context.pluginWorkDirectoryURL)
        ]
    }
}
