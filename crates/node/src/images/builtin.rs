//! The agent's built-in images: pause (the sandbox image, from
//! `pause.c` built by build.rs and embedded here) and busybox (from the
//! host's static busybox), so a node works with no registry at all.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::oci::{self, ImageConfig, Layer};
use super::{Error, Result};

/// The sandbox image every pod runs in (containerd's `sandbox_image`).
pub const PAUSE_IMAGE: &str = "localhost/skiff/pause:1.0";
/// Busybox under the name that manifests use.
pub const BUSYBOX_IMAGE: &str = "docker.io/library/busybox:latest";

/// The pause program: static, freestanding, a few KiB.
pub const PAUSE_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pause"));

/// `PATH` as the Docker Hub busybox image sets it.
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the busybox binary sits in the image; applets link to it.
const BUSYBOX_IN_IMAGE: &str = "/bin/busybox";

const PASSWD: &str =
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n";
const GROUP: &str = "root:x:0:\nnobody:x:65534:\n";

/// The pause image as an OCI archive: `/pause`, entrypoint `["/pause"]`.
pub fn pause_archive() -> Result<Vec<u8>> {
    let mut layer = Layer::new();
    layer.file("/pause", 0o755, PAUSE_BINARY)?;
    let config = ImageConfig {
        env: vec![DEFAULT_PATH.to_owned()],
        entrypoint: vec!["/pause".to_owned()],
        cmd: Vec::new(),
        working_dir: None,
    };
    oci::archive(PAUSE_IMAGE, &layer, &config)
}

/// Busybox as an OCI archive, built from the host's static `busybox`:
/// the binary at `/bin/busybox`, a symlink for each applet where
/// `busybox --list-full` puts it, `/etc/passwd` and `/etc/group` with root
/// and nobody, and the usual empty directories; `Cmd ["sh"]`.
///
/// Runs `busybox --list-full` (a few milliseconds); from async code call it
/// in `spawn_blocking`.
pub fn busybox_archive(busybox: &Path) -> Result<Vec<u8>> {
    let layer = busybox_layer(busybox)?;
    let config = ImageConfig {
        env: vec![DEFAULT_PATH.to_owned()],
        entrypoint: Vec::new(),
        cmd: vec!["sh".to_owned()],
        working_dir: None,
    };
    oci::archive(BUSYBOX_IMAGE, &layer, &config)
}

/// The host's busybox: the first `busybox` on `PATH`, else `/bin/busybox`.
/// Whether it is static is checked when the image is built.
pub fn find_busybox() -> Option<PathBuf> {
    let from_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("busybox"));
    from_path
        .chain(std::iter::once(PathBuf::from("/bin/busybox")))
        .find(|candidate| candidate.is_file())
}

pub(crate) fn busybox_layer(busybox: &Path) -> Result<Layer> {
    let binary = std::fs::read(busybox).map_err(|source| Error::Read {
        path: busybox.to_owned(),
        source,
    })?;
    if !is_static_elf64(&binary) {
        return Err(Error::NotStatic {
            path: busybox.to_owned(),
        });
    }
    let applets = applets(busybox)?;

    let mut layer = Layer::new();
    for dir in [
        "/bin",
        "/sbin",
        "/usr/bin",
        "/usr/sbin",
        "/etc",
        "/var",
        "/home",
        "/proc",
        "/sys",
        "/dev",
    ] {
        layer.dir(dir, 0o755)?;
    }
    layer.dir("/root", 0o700)?;
    layer.dir("/tmp", 0o1777)?;
    layer.dir("/var/tmp", 0o1777)?;
    layer.file("/etc/passwd", 0o644, PASSWD)?;
    layer.file("/etc/group", 0o644, GROUP)?;
    for applet in &applets {
        layer.symlink(applet, BUSYBOX_IN_IMAGE)?;
    }
    layer.file(BUSYBOX_IN_IMAGE, 0o755, binary)?;
    Ok(layer)
}

/// Where busybox's applets go, as relative paths (`bin/sh`,
/// `usr/bin/wget`): from `--list-full`, or all in `bin/` from `--list` for a
/// busybox without it. Leaves out `bin/busybox` itself and `linuxrc`.
fn applets(busybox: &Path) -> Result<Vec<String>> {
    let full = run_list(busybox, "--list-full")?;
    let paths: Vec<String> = match full {
        Some(out) => out.lines().map(str::to_owned).collect(),
        None => run_list(busybox, "--list")?
            .ok_or_else(|| Error::ListApplets {
                path: busybox.to_owned(),
                detail: "neither --list-full nor --list works".to_owned(),
            })?
            .lines()
            .map(|name| format!("bin/{name}"))
            .collect(),
    };
    Ok(paths
        .into_iter()
        .map(|path| path.trim().trim_matches('/').to_owned())
        .filter(|path| !path.is_empty() && path != "bin/busybox" && path != "linuxrc")
        .collect())
}

/// The stdout of `busybox <flag>`, or `None` if it exits non-zero.
fn run_list(busybox: &Path, flag: &str) -> Result<Option<String>> {
    let output = Command::new(busybox)
        .arg(flag)
        .output()
        .map_err(|source| Error::Run {
            program: busybox.to_owned(),
            source,
        })?;
    if !output.status.success() {
        return Ok(None);
    }
    String::from_utf8(output.stdout)
        .map(Some)
        .map_err(|_| Error::ListApplets {
            path: busybox.to_owned(),
            detail: format!("{flag} printed something that is not UTF-8"),
        })
}

/// Whether `bytes` is a 64-bit little-endian ELF executable without an
/// interpreter (`PT_INTERP`), i.e. one that runs in an empty root.
pub(crate) fn is_static_elf64(bytes: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .and_then(|b| <[u8; 2]>::try_from(b).ok())
            .map(u16::from_le_bytes)
    };
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes)
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    // Magic, ELFCLASS64, ELFDATA2LSB.
    if bytes.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    let Ok(phoff) = usize::try_from(phoff) else {
        return false;
    };
    (0..usize::from(phnum)).all(|i| {
        let at = phoff.saturating_add(i.saturating_mul(usize::from(phentsize)));
        matches!(u32_at(at), Some(kind) if kind != PT_INTERP)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::oci::tests::{read_tar, TarFiles};
    use super::*;

    /// The files of the only layer of an archive made by `oci::archive`,
    /// and its image config.
    fn unpack(archive: &[u8]) -> (TarFiles, Value) {
        let files = read_tar(archive);
        let index: Value = serde_json::from_slice(&files["index.json"].2).unwrap();
        let blob = |digest: &Value| {
            let hex = digest.as_str().unwrap().strip_prefix("sha256:").unwrap();
            files[&format!("blobs/sha256/{hex}")].2.clone()
        };
        let manifest: Value =
            serde_json::from_slice(&blob(&index["manifests"][0]["digest"])).unwrap();
        let config: Value = serde_json::from_slice(&blob(&manifest["config"]["digest"])).unwrap();
        let layer = read_tar(&blob(&manifest["layers"][0]["digest"]));
        (layer, config)
    }

    #[test]
    fn the_pause_binary_is_small_and_static() {
        assert!(
            PAUSE_BINARY.len() < 64 * 1024,
            "pause is {} bytes",
            PAUSE_BINARY.len()
        );
        assert!(is_static_elf64(PAUSE_BINARY));
    }

    #[test]
    fn the_pause_image_runs_slash_pause() {
        let archive = pause_archive().unwrap();
        let (layer, config) = unpack(&archive);
        let (kind, mode, data) = &layer["pause"];
        assert_eq!(*kind, tar::EntryType::Regular);
        assert_eq!(*mode, 0o755);
        assert_eq!(data.as_slice(), PAUSE_BINARY);
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/pause"])
        );
        // Same bytes every time: a second import is a no-op.
        assert_eq!(archive, pause_archive().unwrap());
    }

    #[test]
    fn a_dynamic_or_foreign_binary_is_not_static() {
        assert!(!is_static_elf64(b"#!/bin/sh\n"));
        assert!(!is_static_elf64(b"\x7fELF\x02\x01"));
        let sh = std::fs::read("/proc/self/exe").unwrap();
        // The test binary itself is dynamically linked (glibc).
        assert!(!is_static_elf64(&sh));
    }

    #[test]
    fn busybox_from_the_host_has_its_applets() {
        let busybox = Path::new("/bin/busybox");
        if !busybox.is_file() {
            eprintln!("skipped: no /bin/busybox (install busybox-static)");
            return;
        }
        let archive = busybox_archive(busybox).unwrap();
        let (layer, config) = unpack(&archive);
        let (kind, mode, data) = &layer["bin/busybox"];
        assert_eq!(*kind, tar::EntryType::Regular);
        assert_eq!(*mode, 0o755);
        assert_eq!(data, &std::fs::read(busybox).unwrap());
        let (kind, _, target) = &layer["bin/sh"];
        assert_eq!(*kind, tar::EntryType::Symlink);
        assert_eq!(target, b"/bin/busybox");
        assert_eq!(layer["tmp"].1, 0o1777);
        assert_eq!(layer["proc"].0, tar::EntryType::Directory);
        let passwd = String::from_utf8(layer["etc/passwd"].2.clone()).unwrap();
        assert!(passwd.starts_with("root:x:0:0:"));
        assert!(passwd.contains("nobody:x:65534:65534:"));
        assert!(!layer.contains_key("linuxrc"));
        assert_eq!(config["config"]["Cmd"], serde_json::json!(["sh"]));
        assert_eq!(config["config"]["Env"], serde_json::json!([DEFAULT_PATH]));
        assert!(archive.len() > data.len());
    }
}
