import Foundation
import PackagePlugin

/// Puts the HTTP contract into the binary, before each build: `openapi.yaml` and `openapi.json`
/// (at the package root) become `EmbeddedDocuments.openAPIYAML` and `openAPIJSON`, served at
/// `/openapi.yaml` and `/openapi.json`, so the binary needs no file beside it. Each file is a raw
/// string literal (a delimiter of 8 `#`, which neither file contains).
@main
struct EmbeddedDocumentsPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedDocuments.swift")
        let root = context.package.directoryURL.path
        let open = "########" + String(repeating: "\"", count: 3)
        let close = String(repeating: "\"", count: 3) + "########"
        let script = """
            set -e
            out='\(output.path)'
            {
                printf '/// The files of the HTTP contract, as they were when this binary was built.\\n'
                printf 'package enum EmbeddedDocuments {\\n'
                for pair in 'openAPIYAML openapi.yaml' 'openAPIJSON openapi.json'; do
                    name=${pair%% *}; file=${pair#* }
                    printf '    package static let %s = \(open)\\n' "$name"
                    cat '\(root)'/"$file"
                    printf '\\n\(close)\\n'
                done
                printf '}\\n'
            } > "$out.new"
            # Unchanged files leave the output as it was, so nothing is compiled again.
            if cmp -s "$out.new" "$out"; then rm "$out.new"; else mv "$out.new" "$out"; fi
            """
        return [
            .prebuildCommand(
                displayName: "Embedding openapi.yaml and openapi.json", executable: URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", script],
                outputFilesDirectory: context.pluginWorkDirectoryURL)
        ]
    }
}
