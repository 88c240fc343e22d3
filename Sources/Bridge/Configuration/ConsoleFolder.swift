import Foundation

/// Where the web console's files are when `--public-dir` does not say. The console ships with the
/// binary, so a bridge started from any working directory serves it: the places are looked at in
/// order, and the first folder holding the console (its `index.html` and `console.js`; a Meteor
/// app's own `public/` does not count) is served.
public enum ConsoleFolder {
    /// What the search looks at: facts about the process, gathered once (``current``) or given.
    public struct Places: Sendable, Equatable {
        /// The running executable, symbolic links resolved.
        public var executable: String?
        /// The checkout the binary was built from, when it still exists (`swift build`, `swift run`).
        public var sourceRoot: String?
        public var workingDirectory: String

        public init(executable: String?, sourceRoot: String?, workingDirectory: String) {
            self.executable = executable
            self.sourceRoot = sourceRoot
            self.workingDirectory = workingDirectory
        }

        /// This process's.
        public static var current: Places {
            let fileManager = FileManager.default
            // Linux names the executable in /proc; elsewhere Foundation's bundle knows it.
            let executable =
                (try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? Bundle.main.executableURL?.resolvingSymlinksInPath().path
            // This file is <checkout>/Sources/Bridge/Configuration/ConsoleFolder.swift.
            let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().path
            return Places(executable: executable, sourceRoot: source, workingDirectory: fileManager.currentDirectoryPath)
        }
    }

    /// The console's folder in the container image (see the Dockerfile).
    public static let imageFolder = "/app/public"

    /// The folders looked at, in order, each once: `public/` beside the executable and
    /// `../share/ddp-bridge/public` (an installed binary), the image's, the checkout's the binary
    /// was built from, the working directory's.
    public static func candidates(_ places: Places) -> [String] {
        var folders: [String] = []
        if let executable = places.executable {
            let beside = URL(fileURLWithPath: executable).deletingLastPathComponent()
            folders.append(beside.appendingPathComponent("public").path)
            folders.append(beside.deletingLastPathComponent().appendingPathComponent("share/ddp-bridge/public").path)
        }
        folders.append(imageFolder)
        if let root = places.sourceRoot { folders.append(URL(fileURLWithPath: root).appendingPathComponent("public").path) }
        folders.append(URL(fileURLWithPath: places.workingDirectory).appendingPathComponent("public").path)
        var seen = Set<String>()
        return folders.map { URL(fileURLWithPath: $0).standardizedFileURL.path }.filter { seen.insert($0).inserted }
    }

    /// Whether `folder` holds the console.
    public static func holdsConsole(_ folder: String) -> Bool {
        let fileManager = FileManager.default
        return ["index.html", "console.js"].allSatisfy { fileManager.isReadableFile(atPath: folder + "/" + $0) }
    }

    /// The first candidate holding the console, or every folder looked at.
    public static func search(_ places: Places, holdsConsole: (String) -> Bool = holdsConsole) -> Result<String, NotFound> {
        let folders = candidates(places)
        guard let found = folders.first(where: holdsConsole) else { return .failure(NotFound(searched: folders)) }
        return .success(found)
    }

    /// No folder looked at holds the console.
    public struct NotFound: Error, Equatable {
        /// The folders looked at, in order.
        public let searched: [String]

        public init(searched: [String]) { self.searched = searched }
    }
}
