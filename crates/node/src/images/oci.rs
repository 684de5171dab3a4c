//! An OCI image-layout archive (what `ctr images import` reads), written in
//! memory: `oci-layout`, `index.json` naming one manifest, and
//! `blobs/sha256/<digest>` for the manifest, the image config and one
//! uncompressed layer.
//!
//! Every header has mtime 0, uid/gid 0 and entries go out in path order, so
//! the same files always make the same digests (importing again is a no-op).

use std::collections::BTreeMap;

use ring::digest::{digest, SHA256};
use serde_json::{json, Map, Value};

use super::{Error, Result};

pub const MEDIA_TYPE_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_TYPE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_TYPE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_TYPE_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
/// containerd's annotation for the full image name (used by `ctr import`
/// before the OCI ref name).
pub const ANNOTATION_IMAGE_NAME: &str = "io.containerd.image.name";
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let sum = digest(&SHA256, bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in sum.as_ref() {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The Go name (as in image configs and platforms) of this machine's
/// architecture.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir { mode: u32 },
    File { mode: u32, data: Vec<u8> },
    Symlink { target: String },
}

/// The files of one layer. Paths are relative to the image root (a leading
/// `/` is dropped); parents not added explicitly become 0755 directories.
/// Adding a path again replaces it.
#[derive(Debug, Clone, Default)]
pub struct Layer {
    entries: BTreeMap<String, Entry>,
}

impl Layer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn dir(&mut self, path: &str, mode: u32) -> Result<&mut Self> {
        let path = clean_path(path)?;
        self.entries.insert(path, Entry::Dir { mode });
        Ok(self)
    }

    pub fn file(&mut self, path: &str, mode: u32, data: impl Into<Vec<u8>>) -> Result<&mut Self> {
        let path = clean_path(path)?;
        let data = data.into();
        self.entries.insert(path, Entry::File { mode, data });
        Ok(self)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<&mut Self> {
        let path = clean_path(path)?;
        if target.is_empty() || target.contains('\0') {
            return Err(Error::InvalidPath {
                path: target.to_owned(),
            });
        }
        let target = target.to_owned();
        self.entries.insert(path, Entry::Symlink { target });
        Ok(self)
    }

    /// Whether `path` (as given to the adders) is in the layer.
    pub fn contains(&self, path: &str) -> bool {
        clean_path(path).is_ok_and(|p| self.entries.contains_key(&p))
    }

    /// The symlink target at `path`, if `path` is a symlink.
    pub fn symlink_target(&self, path: &str) -> Option<&str> {
        let path = clean_path(path).ok()?;
        match self.entries.get(&path) {
            Some(Entry::Symlink { target }) => Some(target),
            _ => None,
        }
    }

    /// The layer as an uncompressed tar.
    pub fn tar(&self) -> Result<Vec<u8>> {
        let mut entries = self.entries.clone();
        // Implied parents, so every directory has an entry of its own.
        for path in self.entries.keys() {
            let mut parent = path.as_str();
            while let Some((up, _)) = parent.rsplit_once('/') {
                entries
                    .entry(up.to_owned())
                    .or_insert(Entry::Dir { mode: 0o755 });
                parent = up;
            }
        }
        let mut builder = tar::Builder::new(Vec::new());
        for (path, entry) in &entries {
            let mut header = header();
            match entry {
                Entry::Dir { mode } => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_mode(*mode);
                    header.set_size(0);
                    builder
                        .append_data(&mut header, format!("{path}/"), std::io::empty())
                        .map_err(|source| Error::Tar { source })?;
                }
                Entry::File { mode, data } => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(*mode);
                    header.set_size(data.len() as u64);
                    builder
                        .append_data(&mut header, path, data.as_slice())
                        .map_err(|source| Error::Tar { source })?;
                }
                Entry::Symlink { target } => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_mode(0o777);
                    header.set_size(0);
                    builder
                        .append_link(&mut header, path, target)
                        .map_err(|source| Error::Tar { source })?;
                }
            }
        }
        builder.into_inner().map_err(|source| Error::Tar { source })
    }
}

/// The runtime defaults of an image (the `config` object of an OCI image
/// config). Empty lists and `None` are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    pub env: Vec<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub working_dir: Option<String>,
}

impl ImageConfig {
    fn to_json(&self) -> Value {
        let mut config = Map::new();
        if !self.env.is_empty() {
            config.insert("Env".into(), json!(self.env));
        }
        if !self.entrypoint.is_empty() {
            config.insert("Entrypoint".into(), json!(self.entrypoint));
        }
        if !self.cmd.is_empty() {
            config.insert("Cmd".into(), json!(self.cmd));
        }
        if let Some(dir) = &self.working_dir {
            config.insert("WorkingDir".into(), json!(dir));
        }
        Value::Object(config)
    }
}

/// The tag of a fully qualified `name` (`docker.io/library/busybox:latest`
/// → `latest`); digests and names without a tag are refused.
pub fn tag_of(name: &str) -> Result<&str> {
    let invalid = || Error::InvalidName {
        name: name.to_owned(),
    };
    if name.contains('@') {
        return Err(invalid());
    }
    let (repo, tag) = name.rsplit_once(':').ok_or_else(invalid)?;
    if repo.is_empty() || tag.is_empty() || tag.contains('/') || !repo.contains('/') {
        return Err(invalid());
    }
    Ok(tag)
}

/// An OCI image-layout tar holding one image called `name` (fully
/// qualified, with a tag) made of `layer` and `config`.
pub fn archive(name: &str, layer: &Layer, config: &ImageConfig) -> Result<Vec<u8>> {
    let tag = tag_of(name)?;
    let arch = go_arch();

    let layer_tar = layer.tar()?;
    let layer_digest = sha256_digest(&layer_tar);

    let config_json = to_vec(&json!({
        "architecture": arch,
        "os": "linux",
        "config": config.to_json(),
        "rootfs": { "type": "layers", "diff_ids": [layer_digest] },
        "history": [{ "created_by": "skiff-node built-in image" }],
    }))?;
    let config_digest = sha256_digest(&config_json);

    let manifest_json = to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MEDIA_TYPE_MANIFEST,
        "config": {
            "mediaType": MEDIA_TYPE_CONFIG,
            "digest": config_digest,
            "size": config_json.len(),
        },
        "layers": [{
            "mediaType": MEDIA_TYPE_LAYER,
            "digest": layer_digest,
            "size": layer_tar.len(),
        }],
    }))?;
    let manifest_digest = sha256_digest(&manifest_json);

    let index_json = to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MEDIA_TYPE_INDEX,
        "manifests": [{
            "mediaType": MEDIA_TYPE_MANIFEST,
            "digest": manifest_digest,
            "size": manifest_json.len(),
            "platform": { "architecture": arch, "os": "linux" },
            "annotations": {
                ANNOTATION_IMAGE_NAME: name,
                ANNOTATION_REF_NAME: tag,
            },
        }],
    }))?;

    let mut out = tar::Builder::new(Vec::new());
    append_file(&mut out, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    append_file(&mut out, "index.json", &index_json)?;
    append_dir(&mut out, "blobs/")?;
    append_dir(&mut out, "blobs/sha256/")?;
    for (digest, bytes) in [
        (&manifest_digest, &manifest_json),
        (&config_digest, &config_json),
        (&layer_digest, &layer_tar),
    ] {
        let hex = digest.trim_start_matches("sha256:");
        append_file(&mut out, &format!("blobs/sha256/{hex}"), bytes)?;
    }
    out.into_inner().map_err(|source| Error::Tar { source })
}

fn to_vec(value: &Value) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|source| Error::Json { source })
}

fn header() -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

fn append_file(out: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8]) -> Result<()> {
    let mut header = header();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o644);
    header.set_size(data.len() as u64);
    out.append_data(&mut header, path, data)
        .map_err(|source| Error::Tar { source })
}

fn append_dir(out: &mut tar::Builder<Vec<u8>>, path: &str) -> Result<()> {
    let mut header = header();
    header.set_entry_type(tar::EntryType::Directory);
    header.set_mode(0o755);
    header.set_size(0);
    out.append_data(&mut header, path, std::io::empty())
        .map_err(|source| Error::Tar { source })
}

/// `path` without leading `/`s or trailing `/`s; no empty, `.` or `..`
/// components.
fn clean_path(path: &str) -> Result<String> {
    let trimmed = path.trim_matches('/');
    let bad = trimmed.is_empty()
        || trimmed.contains('\0')
        || trimmed
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if bad {
        return Err(Error::InvalidPath {
            path: path.to_owned(),
        });
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;
    use std::io::Read;

    use super::*;

    /// path → (entry type, mode, bytes or link target) of a tar.
    pub(crate) type TarFiles = HashMap<String, (tar::EntryType, u32, Vec<u8>)>;

    pub(crate) fn read_tar(bytes: &[u8]) -> TarFiles {
        let mut archive = tar::Archive::new(bytes);
        let mut out = HashMap::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let header = entry.header().clone();
            assert_eq!(header.mtime().unwrap(), 0);
            assert_eq!(header.uid().unwrap(), 0);
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            let mut data = Vec::new();
            if header.entry_type() == tar::EntryType::Symlink {
                data = entry
                    .link_name()
                    .unwrap()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
                    .into_bytes();
            } else {
                entry.read_to_end(&mut data).unwrap();
            }
            out.insert(
                path.trim_end_matches('/').to_owned(),
                (header.entry_type(), header.mode().unwrap(), data),
            );
        }
        out
    }

    fn sample() -> (Layer, ImageConfig) {
        let mut layer = Layer::new();
        layer
            .file("/bin/hello", 0o755, b"#!/bin/sh\necho hi\n".to_vec())
            .unwrap()
            .symlink("/usr/bin/hi", "/bin/hello")
            .unwrap()
            .dir("/tmp", 0o1777)
            .unwrap();
        let config = ImageConfig {
            env: vec!["PATH=/bin".into()],
            entrypoint: vec!["/bin/hello".into()],
            cmd: vec![],
            working_dir: Some("/".into()),
        };
        (layer, config)
    }

    fn blob(files: &TarFiles, digest: &str) -> Vec<u8> {
        let hex = digest.strip_prefix("sha256:").unwrap();
        let bytes = files[&format!("blobs/sha256/{hex}")].2.clone();
        assert_eq!(
            sha256_digest(&bytes),
            digest,
            "blob {hex} has another digest"
        );
        bytes
    }

    #[test]
    fn archive_digests_chain_from_index_to_layer() {
        let (layer, config) = sample();
        let bytes = archive("localhost/skiff/hello:1.0", &layer, &config).unwrap();
        let files = read_tar(&bytes);

        let layout: Value = serde_json::from_slice(&files["oci-layout"].2).unwrap();
        assert_eq!(layout["imageLayoutVersion"], "1.0.0");

        let index: Value = serde_json::from_slice(&files["index.json"].2).unwrap();
        assert_eq!(index["schemaVersion"], 2);
        let manifests = index["manifests"].as_array().unwrap();
        assert_eq!(manifests.len(), 1);
        let desc = &manifests[0];
        assert_eq!(desc["mediaType"], MEDIA_TYPE_MANIFEST);
        assert_eq!(
            desc["annotations"][ANNOTATION_IMAGE_NAME],
            "localhost/skiff/hello:1.0"
        );
        assert_eq!(desc["annotations"][ANNOTATION_REF_NAME], "1.0");
        assert_eq!(desc["platform"]["architecture"], go_arch());

        let manifest_bytes = blob(&files, desc["digest"].as_str().unwrap());
        assert_eq!(desc["size"], manifest_bytes.len());
        let manifest: Value = serde_json::from_slice(&manifest_bytes).unwrap();
        assert_eq!(manifest["mediaType"], MEDIA_TYPE_MANIFEST);

        let config_bytes = blob(&files, manifest["config"]["digest"].as_str().unwrap());
        assert_eq!(manifest["config"]["size"], config_bytes.len());
        let image: Value = serde_json::from_slice(&config_bytes).unwrap();
        assert_eq!(image["os"], "linux");
        assert_eq!(image["architecture"], go_arch());
        assert_eq!(image["config"]["Env"], json!(["PATH=/bin"]));
        assert_eq!(image["config"]["Entrypoint"], json!(["/bin/hello"]));
        assert!(image["config"].get("Cmd").is_none());
        assert_eq!(image["config"]["WorkingDir"], "/");

        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0]["mediaType"], MEDIA_TYPE_LAYER);
        let layer_bytes = blob(&files, layers[0]["digest"].as_str().unwrap());
        assert_eq!(layers[0]["size"], layer_bytes.len());
        // Uncompressed layer: its diff_id is its own digest.
        assert_eq!(image["rootfs"]["type"], "layers");
        assert_eq!(image["rootfs"]["diff_ids"], json!([layers[0]["digest"]]));

        let layer_files = read_tar(&layer_bytes);
        let (kind, mode, data) = &layer_files["bin/hello"];
        assert_eq!(*kind, tar::EntryType::Regular);
        assert_eq!(*mode, 0o755);
        assert_eq!(data, b"#!/bin/sh\necho hi\n");
        assert_eq!(layer_files["usr/bin/hi"].0, tar::EntryType::Symlink);
        assert_eq!(layer_files["usr/bin/hi"].2, b"/bin/hello");
        assert_eq!(layer_files["tmp"].0, tar::EntryType::Directory);
        assert_eq!(layer_files["tmp"].1, 0o1777);
        // Implied parents.
        for dir in ["bin", "usr", "usr/bin"] {
            assert_eq!(layer_files[dir].0, tar::EntryType::Directory, "{dir}");
            assert_eq!(layer_files[dir].1, 0o755, "{dir}");
        }
    }

    #[test]
    fn archive_is_deterministic_whatever_the_order_of_adding() {
        let (layer, config) = sample();
        let mut other = Layer::new();
        other
            .dir("tmp/", 0o1777)
            .unwrap()
            .symlink("usr/bin/hi", "/bin/hello")
            .unwrap()
            .file("bin/hello", 0o755, b"#!/bin/sh\necho hi\n".to_vec())
            .unwrap();
        let a = archive("localhost/skiff/hello:1.0", &layer, &config).unwrap();
        let b = archive("localhost/skiff/hello:1.0", &other, &config).unwrap();
        assert_eq!(sha256_digest(&a), sha256_digest(&b));
    }

    #[test]
    fn names_need_a_repository_and_a_tag() {
        assert_eq!(
            tag_of("docker.io/library/busybox:latest").unwrap(),
            "latest"
        );
        assert_eq!(tag_of("localhost:5000/skiff/pause:1.0").unwrap(), "1.0");
        for bad in [
            "busybox",
            "busybox:latest",
            "localhost:5000/pause",
            "docker.io/library/busybox@sha256:abc",
            "docker.io/library/busybox:",
        ] {
            assert!(tag_of(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_are_cleaned_and_checked() {
        let mut layer = Layer::new();
        for bad in ["", "/", "a/../b", "./a", "a//b", "a/\0"] {
            assert!(layer.file(bad, 0o644, Vec::new()).is_err(), "{bad:?}");
        }
        layer.file("//etc/passwd", 0o644, Vec::new()).unwrap();
        assert!(layer.contains("etc/passwd"));
        assert!(layer.contains("/etc/passwd/"));
    }
}
