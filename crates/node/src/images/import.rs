//! Importing image archives into containerd with `ctr`: the built-in
//! images when the runtime lacks them, and the airgap archives an operator
//! drops into `<data dir>/images/`.
//!
//! The command is `ctr --address <sock> --namespace k8s.io images import
//! --snapshotter overlayfs <archive>` (containerd 1.6's ctr unpacks by
//! default, and k8s.io is the CRI plugin's namespace). Whether an image is
//! already there is the caller's question (it asks CRI ImageStatus), passed
//! in as a closure.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::builtin::{self, BUSYBOX_IMAGE, PAUSE_IMAGE};
use super::{Error, Result};

/// containerd's namespace for CRI.
pub const NAMESPACE: &str = "k8s.io";
/// The snapshotter the CRI plugin is configured with; images are unpacked
/// into it on import so containers start without another unpack.
pub const SNAPSHOTTER: &str = "overlayfs";
/// How long one `ctr images import` may take (a large airgap archive on a
/// slow disk takes a while; a hung containerd must not hang the agent).
pub const IMPORT_TIMEOUT: Duration = Duration::from_secs(300);
/// The directory under the data dir whose `*.tar` files are imported.
pub const AIRGAP_DIR: &str = "images";

/// Imports the archive at `archive` (OCI layout or docker-archive tar).
pub async fn import(ctr: &Path, containerd_address: &Path, archive: &Path) -> Result<()> {
    let what = archive.display().to_string();
    let mut command = command(ctr, containerd_address, archive.as_os_str());
    command.stdin(Stdio::null());
    let child = spawn(ctr, &mut command)?;
    let output = wait(child, &what).await?;
    check(&what, output)
}

/// Imports an archive held in memory, streamed to ctr's stdin (`-`), so no
/// temporary file is needed. `what` names it in errors and logs.
pub async fn import_bytes(
    ctr: &Path,
    containerd_address: &Path,
    what: &str,
    archive: &[u8],
) -> Result<()> {
    let mut command = command(ctr, containerd_address, OsStr::new("-"));
    command.stdin(Stdio::piped());
    let mut child = spawn(ctr, &mut command)?;
    let stdin = child.stdin.take();
    let feed = async move {
        let Some(mut stdin) = stdin else {
            return Ok(());
        };
        stdin.write_all(archive).await?;
        stdin.shutdown().await
        // stdin drops here: ctr sees EOF.
    };
    let (fed, output) = tokio::join!(feed, wait(child, what));
    let output = output?;
    // A ctr that failed early stops reading (EPIPE here): its stderr says why.
    check(what, output)?;
    fed.map_err(|source| Error::Feed {
        archive: what.to_owned(),
        source,
    })
}

/// What [`ensure_builtin`] did.
#[derive(Debug, Default)]
pub struct Imported {
    /// Built-in images imported now (absent before).
    pub builtin: Vec<&'static str>,
    /// Built-in images left alone because they were present.
    pub present: Vec<&'static str>,
    /// Airgap archives imported.
    pub airgap: Vec<PathBuf>,
    /// What could not be imported (busybox, airgap archives), and why; the
    /// node still works without them, so they do not fail the call.
    pub failed: Vec<(String, Error)>,
}

/// Makes the runtime hold what the node needs offline:
/// 1. every `<airgap_dir>/*.tar` (airgap archives, in name order;
///    always imported, ctr skips content it has);
/// 2. the pause image, unless `present(PAUSE_IMAGE)`; failing that fails
///    the call (no pod can start without it);
/// 3. busybox from the host's static busybox (`busybox`, else
///    [`builtin::find_busybox`]), unless present or there is no busybox.
///
/// Airgap archives go first so that one carrying pause or busybox wins
/// over the built-in ones.
pub async fn ensure_builtin<P>(
    ctr: &Path,
    containerd_address: &Path,
    airgap_dir: &Path,
    busybox: Option<&Path>,
    present: P,
) -> Result<Imported>
where
    P: Fn(&str) -> bool,
{
    let mut done = Imported::default();

    for archive in airgap_archives(airgap_dir).await? {
        match import(ctr, containerd_address, &archive).await {
            Ok(()) => {
                tracing::info!(archive = %archive.display(), "imported airgap images");
                done.airgap.push(archive);
            }
            Err(error) => {
                tracing::warn!(archive = %archive.display(), %error, "airgap import failed");
                done.failed.push((archive.display().to_string(), error));
            }
        }
    }

    if present(PAUSE_IMAGE) {
        done.present.push(PAUSE_IMAGE);
    } else {
        let archive = builtin::pause_archive()?;
        import_bytes(ctr, containerd_address, PAUSE_IMAGE, &archive).await?;
        tracing::info!(image = PAUSE_IMAGE, "imported the built-in image");
        done.builtin.push(PAUSE_IMAGE);
    }

    if present(BUSYBOX_IMAGE) {
        done.present.push(BUSYBOX_IMAGE);
    } else {
        let host_busybox = busybox.map(Path::to_owned).or_else(builtin::find_busybox);
        match host_busybox {
            None => {
                tracing::warn!(
                    image = BUSYBOX_IMAGE,
                    "no busybox on this host (install busybox-static): not importing it"
                );
            }
            Some(path) => match import_busybox(ctr, containerd_address, path).await {
                Ok(()) => {
                    tracing::info!(image = BUSYBOX_IMAGE, "imported the built-in image");
                    done.builtin.push(BUSYBOX_IMAGE);
                }
                Err(error) => {
                    tracing::warn!(image = BUSYBOX_IMAGE, %error, "importing busybox failed");
                    done.failed.push((BUSYBOX_IMAGE.to_owned(), error));
                }
            },
        }
    }

    Ok(done)
}

async fn import_busybox(ctr: &Path, containerd_address: &Path, busybox: PathBuf) -> Result<()> {
    // Reads ~2 MB and runs `busybox --list-full`: off the async threads.
    let archive = tokio::task::spawn_blocking(move || builtin::busybox_archive(&busybox))
        .await
        .map_err(|source| Error::Join { source })??;
    import_bytes(ctr, containerd_address, BUSYBOX_IMAGE, &archive).await
}

/// The regular `*.tar` files directly in `dir`, by name; none if `dir` does
/// not exist.
pub async fn airgap_archives(dir: &Path) -> Result<Vec<PathBuf>> {
    let read_error = |source| Error::Read {
        path: dir.to_owned(),
        source,
    };
    let mut entries = match tokio::fs::read_dir(dir).await {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(read_error(error)),
    };
    let mut archives = Vec::new();
    while let Some(entry) = entries.next_entry().await.map_err(read_error)? {
        let path = entry.path();
        let is_tar = path.extension().is_some_and(|ext| ext == "tar");
        // Follows symlinks: an operator may link archives from elsewhere.
        let is_file = tokio::fs::metadata(&path)
            .await
            .is_ok_and(|meta| meta.is_file());
        if is_tar && is_file {
            archives.push(path);
        }
    }
    archives.sort();
    Ok(archives)
}

fn command(ctr: &Path, containerd_address: &Path, archive: &OsStr) -> Command {
    let mut command = Command::new(ctr);
    command
        .arg("--address")
        .arg(containerd_address)
        .args([
            "--namespace",
            NAMESPACE,
            "images",
            "import",
            "--snapshotter",
            SNAPSHOTTER,
        ])
        .arg(archive)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

fn spawn(ctr: &Path, command: &mut Command) -> Result<tokio::process::Child> {
    command.spawn().map_err(|source| Error::Run {
        program: ctr.to_owned(),
        source,
    })
}

async fn wait(child: tokio::process::Child, what: &str) -> Result<std::process::Output> {
    match tokio::time::timeout(IMPORT_TIMEOUT, child.wait_with_output()).await {
        // Dropping the future drops the child: kill_on_drop ends ctr.
        Err(_) => Err(Error::Timeout {
            archive: what.to_owned(),
            after: IMPORT_TIMEOUT,
        }),
        Ok(Err(source)) => Err(Error::Wait {
            archive: what.to_owned(),
            source,
        }),
        Ok(Ok(output)) => Ok(output),
    }
}

fn check(what: &str, output: std::process::Output) -> Result<()> {
    if output.status.success() {
        tracing::debug!(
            archive = what,
            stdout = %String::from_utf8_lossy(&output.stdout).trim(),
            "ctr images import"
        );
        return Ok(());
    }
    Err(Error::Ctr {
        archive: what.to_owned(),
        status: output.status,
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A fake ctr: logs its arguments and the size of its stdin (or of the
    /// archive file) to `log`; fails with a message on stderr for archives
    /// whose name contains "bad".
    fn fake_ctr(dir: &Path) -> (PathBuf, PathBuf) {
        let log = dir.join("ctr.log");
        let script = dir.join("ctr");
        std::fs::write(
            &script,
            format!(
                r#"#!/bin/sh
for last; do :; done
case "$last" in *bad*) echo "ctr: unrecognized image format" >&2; exit 1;; esac
if [ "$last" = - ]; then n=$(wc -c | tr -d ' '); else n=$(wc -c < "$last" | tr -d ' '); fi
echo "$* [$n bytes]" >> {log}
"#,
                log = log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        (script, log)
    }

    #[tokio::test]
    async fn imports_airgap_archives_then_what_is_absent() {
        let dir = tempfile::tempdir().unwrap();
        let (ctr, log) = fake_ctr(dir.path());
        let images = dir.path().join("data").join(AIRGAP_DIR);
        std::fs::create_dir_all(&images).unwrap();
        std::fs::write(images.join("b.tar"), b"bbbb").unwrap();
        std::fs::write(images.join("a.tar"), b"aa").unwrap();
        std::fs::write(images.join("bad.tar"), b"x").unwrap();
        std::fs::write(images.join("notes.txt"), b"not an archive").unwrap();
        std::fs::create_dir(images.join("dir.tar")).unwrap();

        let sock = Path::new("/run/skiff/containerd.sock");
        // Spawned: the future must be Send for the agent to run it.
        let task = tokio::spawn({
            let ctr = ctr.clone();
            let data = dir.path().join("data").join(AIRGAP_DIR);
            async move {
                ensure_builtin(
                    &ctr,
                    sock,
                    &data,
                    Some(Path::new("/nonexistent/busybox")),
                    |name: &str| name == BUSYBOX_IMAGE,
                )
                .await
            }
        });
        let done = task.await.unwrap().unwrap();

        assert_eq!(done.builtin, vec![PAUSE_IMAGE]);
        assert_eq!(done.present, vec![BUSYBOX_IMAGE]);
        assert_eq!(
            done.airgap,
            vec![images.join("a.tar"), images.join("b.tar")]
        );
        assert_eq!(done.failed.len(), 1);
        let (what, error) = &done.failed[0];
        assert_eq!(what, &images.join("bad.tar").display().to_string());
        assert!(
            error.to_string().contains("unrecognized image format"),
            "{error}"
        );

        let log = std::fs::read_to_string(log).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        let prefix = "--address /run/skiff/containerd.sock --namespace k8s.io images import --snapshotter overlayfs";
        assert_eq!(lines.len(), 3, "{log}");
        assert_eq!(
            lines[0],
            format!("{prefix} {} [2 bytes]", images.join("a.tar").display())
        );
        assert_eq!(
            lines[1],
            format!("{prefix} {} [4 bytes]", images.join("b.tar").display())
        );
        let pause_len = builtin::pause_archive().unwrap().len();
        assert_eq!(lines[2], format!("{prefix} - [{pause_len} bytes]"));
    }

    #[tokio::test]
    async fn a_failed_pause_import_fails_the_call_with_ctr_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("ctr");
        std::fs::write(
            &script,
            "#!/bin/sh\ncat >/dev/null\necho 'ctr: connection refused' >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = ensure_builtin(
            &script,
            Path::new("/x.sock"),
            dir.path(),
            None,
            |_: &str| false,
        )
        .await
        .unwrap_err();
        match &error {
            Error::Ctr {
                archive, stderr, ..
            } => {
                assert_eq!(archive, PAUSE_IMAGE);
                assert_eq!(stderr, "ctr: connection refused");
            }
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_missing_ctr_is_a_run_error() {
        let error = import(
            Path::new("/nonexistent/ctr"),
            Path::new("/x.sock"),
            Path::new("/x.tar"),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, Error::Run { .. }), "{error:?}");
    }
}
