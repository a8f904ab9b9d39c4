//! Link settings of the `a2a` binary.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // A release `a2a` keeps the line tables of its Rust code, for the file
    // and line of each frame of a panic's backtrace (see the release
    // profile in the workspace's Cargo.toml). Compressed (zlib, which the
    // standard library's backtraces and binutils read), they take about a
    // quarter of the room. GNU ld, gold, lld and mold all know the flag.
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    if linux && release {
        println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    }
}
