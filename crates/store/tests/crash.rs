//! Crash safety of the embedded store: a child process writes as fast as it
//! can and logs every acknowledged revision; we SIGKILL it at a random
//! moment, reopen the database and check that every acknowledged write is
//! there and that the revision never went backwards. Five rounds on the
//! same database.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use skiff_store::sqlite::{Config, SqliteStore};
use skiff_store::Store;

const DIR_ENV: &str = "SKIFF_CRASH_DIR";
const ROUND_ENV: &str = "SKIFF_CRASH_ROUND";

/// The writer, run as a child process by `crash_safety`.
#[test]
#[ignore = "child process of crash_safety"]
fn crash_child() {
    let (Ok(dir), Ok(round)) = (std::env::var(DIR_ENV), std::env::var(ROUND_ENV)) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let store = SqliteStore::open(Path::new(&dir).join("state.db"), Config::default()).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(Path::new(&dir).join(format!("acked-{round}.log")))
            .unwrap();
        let log = Arc::new(Mutex::new(log));
        let mut tasks = Vec::new();
        for task in 0..16 {
            let (store, log, round) = (store.clone(), log.clone(), round.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    let key = format!("/crash/{round}-{task}-{i}");
                    let kv = store
                        .create(&key, format!("value {i}").into())
                        .await
                        .unwrap();
                    // The log survives SIGKILL (page cache); no fsync needed.
                    writeln!(log.lock().unwrap(), "{key} {}", kv.mod_revision).unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

fn acked(path: &Path) -> Vec<(String, i64)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // The last line may be cut short by the kill; only whole lines count.
    text.split_inclusive('\n')
        .filter(|line| line.ends_with('\n'))
        .map(|line| {
            let (key, rev) = line.trim_end().split_once(' ').unwrap();
            (key.to_string(), rev.parse().unwrap())
        })
        .collect()
}

#[test]
fn crash_safety() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut last_revision = 0;
    for round in 0..5 {
        let log_path = dir.path().join(format!("acked-{round}.log"));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR_ENV, dir.path())
            .env(ROUND_ENV, round.to_string())
            .spawn()
            .unwrap();
        // Wait until the child is writing (its first acknowledgement)...
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked(&log_path).is_empty() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the writer exited early"
            );
            assert!(
                Instant::now() < deadline,
                "the writer never acknowledged a write"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // ...then kill it at a random moment mid-stream.
        std::thread::sleep(Duration::from_millis(rand::rng().random_range(20..400)));
        child.kill().unwrap();
        child.wait().unwrap();

        let acked = acked(&log_path);
        let max_acked = acked.iter().map(|(_, rev)| *rev).max().unwrap();
        runtime.block_on(async {
            let store = SqliteStore::open(dir.path().join("state.db"), Config::default()).unwrap();
            let current = store.current_revision().await.unwrap();
            assert!(
                current >= max_acked,
                "round {round}: revision {current} < acked {max_acked}"
            );
            assert!(
                current >= last_revision,
                "round {round}: revision went backwards"
            );
            last_revision = current;
            for (key, rev) in &acked {
                let kv = store.get(key).await.unwrap_or_else(|e| {
                    panic!("round {round}: acknowledged write {key}@{rev} lost: {e}")
                });
                assert_eq!(kv.mod_revision, *rev, "round {round}: {key}");
            }
            // The reopened store keeps counting up.
            let next = store
                .create(&format!("/after/{round}"), "x".into())
                .await
                .unwrap();
            assert!(next.mod_revision > current);
            last_revision = next.mod_revision;
            eprintln!(
                "round {round}: {} acknowledged writes survived SIGKILL",
                acked.len()
            );
        });
    }
}
