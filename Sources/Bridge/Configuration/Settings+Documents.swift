import Foundation

extension Settings {
    /// The documents made from the table of settings (``all``), as `--help` is.
    public enum Document: Sendable, CaseIterable {
        /// The reference table in docs/OPERATIONS.md.
        case markdown
        /// deploy/bridge.yaml.example: a settings file with every setting at its default, commented out.
        case yaml
        /// deploy/bridge.env.example: every setting's variable at its default, commented out.
        case environment
    }

    /// `document`'s part made from the table: one entry per setting, in the table's order.
    public static func reference(_ document: Document) -> String {
        switch document {
        case .markdown:
            let rows = all.map { setting in
                let shown = setting.shownDefault.map { "`\($0)`" } ?? "none"
                let help = setting.help.replacingOccurrences(of: "|", with: "\\|")
                return "| `--\(setting.flag)` | `\(setting.environment)` | \(shown) | \(help)\(setting.isSecret ? " (a secret)" : "") |"
            }
            return (["| flag | variable | default | what it sets |", "|---|---|---|---|"] + rows).joined(separator: "\n") + "\n"
        case .yaml:
            return all.filter { !["config", "secrets-dir"].contains($0.flag) }.map { setting in
                let line = setting.shownDefault.map { "# \(setting.flag): \(yamlScalar($0))" } ?? "# \(setting.flag):"
                return line + "\n"
                    + HelpText.wrap(setting.help, indent: 4, width: 98).split(separator: "\n").map { "#" + $0.dropFirst() }.joined(separator: "\n")
            }.joined(separator: "\n") + "\n"
        case .environment:
            return all.map { setting in
                let line = "# \(setting.environment)=\(setting.shownDefault ?? "")"
                return line + "\n"
                    + HelpText.wrap(setting.help, indent: 4, width: 98).split(separator: "\n").map { "#" + $0.dropFirst() }.joined(separator: "\n")
            }.joined(separator: "\n") + "\n"
        }
    }

    /// A default as YAML reads it back as the same text: plain when it is a number, a word or a
    /// path, quoted otherwise.
    static func yamlScalar(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "._/-".unicodeScalars.contains($0) }
        return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }
}

extension Settings.Setting {
    /// The value as help shows it, of `settings`.
    public func shown(_ settings: Settings) -> String? { show(settings) }
}
