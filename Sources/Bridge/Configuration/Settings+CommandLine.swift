extension Settings {
    /// The settings on a command line: `--flag value` or `--flag=value`, and a bare `--flag` for
    /// a switch. Refuses a flag no setting has, naming the setting (or `otherFlags`, the
    /// command's own options) it most likely meant, and a value missing.
    public static func flags(from arguments: [String], otherFlags: [String] = []) throws(Invalid) -> [String: String] {
        var flags: [String: String] = [:]
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                // Not quoted: a stray argument may be half of a secret the shell split.
                throw Invalid(
                    description:
                        "unexpected argument (the \(index)\(Self.ordinalSuffix(index)) of the command's settings); settings are given as --name value (see --help)"
                )
            }
            var name = String(argument.dropFirst(2))
            var text: String?
            if let equals = name.firstIndex(of: "=") {
                text = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let setting = all.first(where: { $0.flag == name }) else {
                guard let meant = ClosestName.suggestion(for: name, among: all.map(\.flag) + otherFlags) else {
                    throw Invalid(description: "unknown setting --\(name) (see --help for the settings)")
                }
                throw Invalid(description: "unknown setting --\(name); did you mean --\(meant)?")
            }
            if text == nil, index < arguments.endIndex, !(setting.isSwitch && arguments[index].hasPrefix("--")) {
                text = arguments[index]
                index += 1
            }
            if text == nil, setting.isSwitch { text = "true" }
            guard let text else { throw Invalid(description: "--\(name) needs a value") }
            flags[name] = text
        }
        return flags
    }

    static func ordinalSuffix(_ n: Int) -> String {
        switch (n % 10, n % 100) {
        case (1, let h) where h != 11: "st"
        case (2, let h) where h != 12: "nd"
        case (3, let h) where h != 13: "rd"
        default: "th"
        }
    }

    /// Every setting (but `excluded`; only those in `only`, when given) with its variable and
    /// default, for `--help`, wrapped at word boundaries under its flag (``HelpText``).
    public static func helpText(excluding excluded: Set<String> = [], only: Set<String>? = nil) -> String {
        all.filter { !excluded.contains($0.flag) && only?.contains($0.flag) != false }.map { setting in
            let shown = setting.shownDefault.map { ", default \($0)" } ?? ""
            return "  --\(setting.flag) \(setting.isSwitch ? "[true|false]" : "<value>")\n"
                + HelpText.wrap("env \(setting.environment)\(shown)", indent: 6) + "\n" + HelpText.wrap(setting.help, indent: 6)
        }.joined(separator: "\n")
    }
}
