//! How the release `a2a` is linked on Linux with glibc, to stay under 25 MiB
//! with every feature it ships (32.8 MB before this; CI checks the bound):
//!
//! - without its symbol table (`--strip-all`): 5.9 MB of it. It had grown
//!   with the code that came in since the last measure (24.3 MB): the
//!   OpenTelemetry exporter, the OS keyring over D-Bus, the PostgreSQL
//!   registry store, JWT, the gRPC health and reflection services, each
//!   with its generic code. A panic's message still names its
//!   file:line:column; a backtrace's frames lose their function names (for
//!   them: `A2A_KEEP_SYMBOLS=1 cargo build --release -p agentwire-cli`).
//! - with packed relative relocations (`-z pack-relative-relocs`, DT_RELR:
//!   GNU ld 2.38 and glibc 2.36 or later): its 41,000 relative relocations
//!   (24 bytes each in `.rela.dyn`, 1 MB) become a few kilobytes of bitmaps.
//!
//! Only the final link of `a2a` changes (the libraries' code is the same,
//! and so is their build cache); debug builds and other targets link as
//! before.

fn main() {
    println!("cargo:rerun-if-env-changed=A2A_KEEP_SYMBOLS");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("PROFILE") != "release"
    {
        return;
    }
    println!("cargo:rustc-link-arg-bin=a2a=-Wl,-z,pack-relative-relocs");
    if var("A2A_KEEP_SYMBOLS") != "1" {
        println!("cargo:rustc-link-arg-bin=a2a=-Wl,--strip-all");
    }
}
