// libFuzzer's entry point for the one binary scripts/fuzz.sh compiles with every target and
// Sources/DDP: the variable FUZZ_TARGET names the target each run fuzzes.
import Foundation

let fuzzTarget: @Sendable (UnsafePointer<UInt8>, Int) -> CInt = {
    switch ProcessInfo.processInfo.environment["FUZZ_TARGET"] {
    case "ejson": fuzzEJSON
    case "messages": fuzzMessages
    case "selector": fuzzSelector
    case "query": fuzzQuery
    case "frontdoor": fuzzFrontDoor
    case let other: fatalError("FUZZ_TARGET must name a target (ejson, messages, selector, query, frontdoor), not \(other ?? "nothing")")
    }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzTarget(data, size)
}
