//! Link options of the `skiff` binary (and only of it: the workspace's
//! other crates and tests link as cargo's defaults do).

fn main() {
    // Identical code folding: lld (rustc's default linker on
    // x86_64-unknown-linux-gnu since 1.90) keeps one copy of functions
    // whose machine code is byte for byte the same. Release builds do not
    // share generic instances between crates, so the same `Deserialize`
    // or `drop_in_place` of a Kubernetes type is compiled into every crate
    // that uses it; folding them makes the text smaller, and with it the
    // pages of code an idle server keeps resident (`skiff-bench services`,
    // part 5). Rust promises no distinct function addresses, so `all` is
    // safe for Rust code.
    println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
    println!("cargo:rerun-if-changed=build.rs");
}
