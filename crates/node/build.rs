//! Builds the built-in pause image's program (`src/images/pause.c`): a
//! freestanding static binary, with no libc, into `$OUT_DIR/pause`, which
//! `images::builtin` embeds with `include_bytes!`.

use std::env;
use std::path::PathBuf;

const SOURCE: &str = "src/images/pause.c";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed=build.rs");

    let out = PathBuf::from(env::var("OUT_DIR")?).join("pause");
    let source = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join(SOURCE);

    // The compiler the cc crate picks for the target (honours CC, CFLAGS and
    // cross toolchains); its default flags (-O0, -g, -fPIC, ...) are
    // overridden by the ones below, and -s drops any debug info.
    let compiler = cc::Build::new().cargo_warnings(false).try_get_compiler()?;
    let mut command = compiler.to_command();
    command.args([
        "-static",
        "-nostdlib",
        "-nostartfiles",
        "-ffreestanding",
        "-fno-stack-protector",
        "-fno-asynchronous-unwind-tables",
        "-fno-unwind-tables",
        "-fno-pie",
        "-no-pie",
        "-Os",
        "-s",
        "-Wall",
        "-Wl,--build-id=none",
        "-Wl,-z,noexecstack",
        "-Wl,-z,norelro",
        "-Wl,--gc-sections",
        "-o",
    ]);
    command.arg(&out).arg(&source);

    let output = command.output()?;
    if !output.status.success() {
        return Err(format!(
            "building {SOURCE} failed ({}): {:?}\n{}{}",
            output.status,
            command,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        )
        .into());
    }
    Ok(())
}
