import Foundation

/// Help text laid out for a terminal before swift-argument-parser prints it. The parser wraps a
/// line wider than the terminal at the last space that fits and puts the rest flush left, so
/// text written with line breaks of its own, or a setting's long help, came out broken
/// mid-phrase ("Server-Sent" on one line, "Events" on the next) and out of its indent. Text
/// wrapped here is left as it is on a terminal of at least ``width`` + 1 columns (the parser's
/// 80 when it cannot read the terminal's: it must see a line's break within its width).
public enum HelpText {
    /// The columns help text is wrapped to.
    public static let width = 79

    /// Phrases never split across two lines.
    public static let phrases = ["Server-Sent Events", "Meteor app"]

    /// `text` as paragraphs (separated by blank lines; the line breaks inside one are spaces),
    /// each wrapped at word boundaries to `width` columns, every line starting with `indent`
    /// spaces. A word longer than a line stands on a line of its own.
    public static func wrap(_ text: String, indent: Int = 0, width: Int = width) -> String {
        let margin = String(repeating: " ", count: max(0, indent))
        let room = max(1, width - margin.count)
        return paragraphs(text).map { paragraph in
            var lines: [String] = []
            var line = ""
            for word in words(paragraph) {
                if line.isEmpty {
                    line = word
                } else if line.count + 1 + word.count <= room {
                    line += " " + word
                } else {
                    lines.append(line)
                    line = word
                }
            }
            if !line.isEmpty { lines.append(line) }
            return lines.map { margin + $0 }.joined(separator: "\n")
        }.joined(separator: "\n\n")
    }

    /// The paragraphs of `text`, each as one line.
    static func paragraphs(_ text: String) -> [String] {
        var result: [String] = []
        var current: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.allSatisfy({ $0 == " " }) {
                if !current.isEmpty { result.append(current.joined(separator: " ")) }
                current = []
            } else {
                current.append(line)
            }
        }
        if !current.isEmpty { result.append(current.joined(separator: " ")) }
        return result
    }

    /// The words of a paragraph; a phrase of ``phrases`` is one word.
    static func words(_ paragraph: String) -> [String] {
        let glue: Character = "\u{00A0}"
        var text = paragraph
        for phrase in phrases {
            text = text.replacingOccurrences(of: phrase, with: phrase.replacingOccurrences(of: " ", with: String(glue)))
        }
        return text.split(separator: " ").map { $0.replacingOccurrences(of: String(glue), with: " ") }
    }
}
