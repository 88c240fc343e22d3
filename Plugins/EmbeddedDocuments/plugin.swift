import Foundation
import PackagePlugin

/// Puts the files the bridge serves into the binary, before each build, so it needs no file
/// beside it:
/// - the HTTP contract, `openapi.yaml` and `openapi.json` (at the package root), become
///   `EmbeddedDocuments.openAPIYAML` and `openAPIJSON`, served at `/openapi.yaml` and `/openapi.json`;
/// - the web console, every file under `public/`, becomes `EmbeddedConsole.files`, served at `/`
///   unless `--public-dir` names a folder.
/// Each file is a raw string literal (a delimiter of 8 `#`); a file that is not UTF-8 text, or that
/// holds the delimiter, fails the build, naming the file.
@main
struct EmbeddedDocumentsPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let documents = context.pluginWorkDirectoryURL.appending(path: "EmbeddedDocuments.swift")
        let console = context.pluginWorkDirectoryURL.appending(path: "EmbeddedConsole.swift")
        let root = context.package.directoryURL.path
        let open = "########" + String(repeating: "\"", count: 3)
        let close = String(repeating: "\"", count: 3) + "########"
        let script = """
            set -e
            root='\(root)'
            # A file as a raw string literal, after checking it can be one.
            literal() {
                if ! iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1 || grep -q -e '\(close)' -e '\\\\########' "$1" || grep -q "$(printf '\\r')" "$1"; then
                    echo "error: $1 cannot be embedded: not UTF-8 text without carriage returns, or it holds the literal's delimiter" >&2
                    exit 1
                fi
                printf '\(open)\\n'
                cat "$1"
                printf '\\n\(close)'
            }
            # Unchanged files leave an output as it was, so nothing is compiled again.
            keep() { if cmp -s "$1.new" "$1"; then rm "$1.new"; else mv "$1.new" "$1"; fi; }
            out='\(documents.path)'
            {
                printf '/// The files of the HTTP contract, as they were when this binary was built.\\n'
                printf 'package enum EmbeddedDocuments {\\n'
                for pair in 'openAPIYAML openapi.yaml' 'openAPIJSON openapi.json'; do
                    name=${pair%% *}; file=${pair#* }
                    printf '    package static let %s = ' "$name"
                    literal "$root/$file"
                    printf '\\n'
                done
                printf '}\\n'
            } > "$out.new"
            keep "$out"
            out='\(console.path)'
            [ -d "$root/public" ] || { echo "error: $root/public, the web console, is not there" >&2; exit 1; }
            newest=0
            {
                printf '/// The web console (public/), as it was when this binary was built.\\n'
                printf 'package enum EmbeddedConsole {\\n'
                printf '    /// Each file by its path under public/, with a leading slash.\\n'
                printf '    package static let files: [String: String] = [\\n'
                for file in $(cd "$root/public" && find . -type f | LC_ALL=C sort); do
                    path=${file#.}
                    case "$path" in *[!A-Za-z0-9._/-]*) echo "error: public$path: a console file's name must be letters, digits and ._-/" >&2; exit 1 ;; esac
                    printf '        "%s": ' "$path"
                    literal "$root/public$path"
                    printf ',\\n'
                    changed=$(stat -c %Y "$root/public$path" 2>/dev/null || stat -f %m "$root/public$path")
                    [ "$changed" -gt "$newest" ] && newest=$changed
                done
                printf '    ]\\n'
                printf '    /// When the newest of them was last changed, in seconds since 1970.\\n'
                printf '    package static let modified = %s\\n' "$newest"
                printf '}\\n'
            } > "$out.new"
            keep "$out"
            """
        return [
            .prebuildCommand(
                displayName: "Embedding openapi.yaml, openapi.json and the web console", executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script], outputFilesDirectory: context.pluginWorkDirectoryURL)
        ]
    }
}
