//! Switches the negative controls on (`--cfg idmint_negative_controls`) when the build's
//! environment has `IDMINT_NEGATIVE_CONTROLS=1`, and never otherwise: no dependency and no
//! `--all-features` can. DESIGN.md, "Negative controls behind a cfg", says why it is an
//! environment variable and not a cargo feature or `RUSTFLAGS`. idmint-core, idmint-coord and
//! idmint-cli carry this same file (the tidy test keeps the copies equal).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(idmint_negative_controls)");
    println!("cargo::rerun-if-env-changed=IDMINT_NEGATIVE_CONTROLS");
    if std::env::var_os("IDMINT_NEGATIVE_CONTROLS").is_some_and(|value| value == "1") {
        println!("cargo::rustc-cfg=idmint_negative_controls");
    }
}
