//! Declares `cfg(tokio_unstable)`, which a bit-exact replay sets (see `src/world.rs`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
}
