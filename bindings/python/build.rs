//! Switches the negative controls on (`--cfg idmint_negative_controls`) when the build's
//! environment has `IDMINT_NEGATIVE_CONTROLS=1`, and never otherwise, as the build scripts of
//! idmint-core, idmint-coord and idmint-cli do: here it lets a test build take the minter's
//! `_unsafe_no_fork_hook` (scripts/test-python builds with it; `pip install` never does).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(idmint_negative_controls)");
    println!("cargo::rerun-if-env-changed=IDMINT_NEGATIVE_CONTROLS");
    if std::env::var_os("IDMINT_NEGATIVE_CONTROLS").is_some_and(|value| value == "1") {
        println!("cargo::rustc-cfg=idmint_negative_controls");
    }
}
