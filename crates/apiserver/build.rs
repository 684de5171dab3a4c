//! Compiles the vendored Kubernetes `.proto` files (proto/, see its
//! README) into one descriptor set that `protobuf.rs` reads at run time.
//! Uses `protoc` from `$PROTOC` or the PATH (Debian's protobuf-compiler,
//! which the etcd client's build needs as well).

use std::path::{Path, PathBuf};
use std::process::Command;

fn protos(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("proto dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            protos(&path, out);
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
}

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir")).join("proto");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("out dir")).join("k8s-descriptors.pb");
    let mut files = Vec::new();
    protos(&root, &mut files);
    let protoc = std::env::var("PROTOC").unwrap_or_else(|_| "protoc".into());
    let status = Command::new(&protoc)
        .arg("-I")
        .arg(&root)
        .arg("--include_imports")
        .arg(format!("--descriptor_set_out={}", out.display()))
        .args(
            files
                .iter()
                .map(|f| f.strip_prefix(&root).expect("under root")),
        )
        .status()
        .unwrap_or_else(|e| panic!("running {protoc} (apt install protobuf-compiler): {e}"));
    assert!(status.success(), "{protoc} failed on {}", root.display());
    // gnostic's OpenAPI v2 Document alone, for /openapi/v2 (src/openapi_v2/).
    let gnostic = "github.com/google/gnostic-models/openapiv2/OpenAPIv2.proto";
    let v2_out =
        PathBuf::from(std::env::var("OUT_DIR").expect("out dir")).join("openapiv2-descriptors.pb");
    let status = Command::new(&protoc)
        .arg("-I")
        .arg(&root)
        .arg("--include_imports")
        .arg(format!("--descriptor_set_out={}", v2_out.display()))
        .arg(gnostic)
        .status()
        .unwrap_or_else(|e| panic!("running {protoc}: {e}"));
    assert!(status.success(), "{protoc} failed on {gnostic}");
    println!("cargo:rerun-if-changed=proto");
    println!("cargo:rerun-if-env-changed=PROTOC");
}
