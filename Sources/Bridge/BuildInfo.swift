/// What this binary is: its version, and the commit it was built from (`BuildInfo.commit`,
/// written before each build by the `BuildInfo` plugin).
public enum BuildInfo {
    public static let version = "0.3.0"

    /// As `--version` prints it.
    public static var description: String { "\(version) (commit \(commit))" }
}
