//! The agent's offline images: what a node needs with no registry in reach.
//!
//! - [`oci`]: writes an OCI image-layout archive (one image, one
//!   uncompressed layer) in memory, deterministically;
//! - [`builtin`]: the pause image (a freestanding static program built from
//!   `pause.c` by build.rs and embedded) and a busybox image made from the
//!   host's static busybox;
//! - [`import`]: `ctr images import` into containerd's k8s.io namespace,
//!   and [`import::ensure_builtin`], which imports the airgap archives in
//!   `<data dir>/images/` and the built-in images the runtime lacks.
//!
//! It owns building and importing archives only. It does not talk CRI (the
//! caller says what is present, from ImageStatus), does not pull, does not
//! remove images, and never touches containerd's store except through ctr.

// Nothing here may panic on bad input (an archive, a busybox, ctr's
// output): the crate denies unwrap, expect, panic and unchecked indexing.

pub mod builtin;
pub mod import;
pub mod oci;

use std::path::PathBuf;
use std::time::Duration;

pub use builtin::{BUSYBOX_IMAGE, PAUSE_IMAGE};

/// Building or importing an image archive failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A layer path that is empty, has `.`/`..`/empty components or a NUL.
    #[error("invalid path in an image layer: {path:?}")]
    InvalidPath { path: String },
    /// An image name without a repository and a tag.
    #[error("invalid image name {name:?}: want a fully qualified name with a tag")]
    InvalidName { name: String },
    /// Writing a tar stream (in memory) failed.
    #[error("writing an image archive: {source}")]
    Tar {
        #[source]
        source: std::io::Error,
    },
    #[error("encoding image JSON: {source}")]
    Json {
        #[source]
        source: serde_json::Error,
    },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The host's busybox is dynamically linked (Debian's `busybox`, not
    /// `busybox-static`): it would not run in an image without libc.
    #[error("{} is not a static 64-bit ELF executable (install busybox-static)", path.display())]
    NotStatic { path: PathBuf },
    #[error("listing the applets of {}: {detail}", path.display())]
    ListApplets { path: PathBuf, detail: String },
    /// A program (ctr, busybox) could not be started.
    #[error("running {}: {source}", program.display())]
    Run {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Streaming an in-memory archive to ctr failed.
    #[error("feeding {archive} to ctr: {source}")]
    Feed {
        archive: String,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for ctr importing {archive}: {source}")]
    Wait {
        archive: String,
        #[source]
        source: std::io::Error,
    },
    #[error("ctr images import of {archive} did not finish within {after:?}")]
    Timeout { archive: String, after: Duration },
    /// ctr ran and failed; `stderr` is what it said.
    #[error("ctr images import of {archive} failed ({status}): {stderr}")]
    Ctr {
        archive: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    /// The blocking task building an archive did not finish.
    #[error("building an image archive: {source}")]
    Join {
        #[source]
        source: tokio::task::JoinError,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
