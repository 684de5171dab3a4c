//! The CronJob controller against a real in-process API server, on a
//! wall clock the test moves: a minute passes without waiting for it,
//! and the test pokes the CronJob (an annotation) so the controller looks
//! at it again at the new time. The Job controller does not run; the
//! tests finish Jobs by writing their status as it would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use skiff_controllers::manager::WallClock;
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

struct Env {
    _server: TestApiServer,
    client: Client,
    stop: CancellationToken,
    now: Arc<Mutex<Timestamp>>,
    pokes: u32,
}

impl Env {
    async fn start(ns: &str) -> Self {
        let server = TestApiServer::start(|c| c, Options::default()).await;
        let client = server.client().await;
        let stop = CancellationToken::new();
        let now = Arc::new(Mutex::new(Timestamp::now()));
        let clock = now.clone();
        let manager = ControllerManager::new(Config {
            leader_election: None,
            controllers: vec!["cronjob".into()],
            wall_clock: WallClock::from_fn(move || *clock.lock().unwrap()),
            ..Config::default()
        });
        tokio::spawn(manager.run(client.clone(), stop.clone()));
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &n)
            .await
            .unwrap();
        Self {
            _server: server,
            client,
            stop,
            now,
            pokes: 0,
        }
    }

    fn cronjobs(&self, ns: &str) -> Api<CronJob> {
        Api::namespaced(self.client.clone(), ns)
    }

    fn jobs(&self, ns: &str) -> Api<Job> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Moves the clock and makes the controller look at `name` again.
    async fn advance(&mut self, ns: &str, name: &str, by: Duration) {
        {
            let mut now = self.now.lock().unwrap();
            *now += by;
        }
        self.pokes += 1;
        let poke = Patch::Merge(
            json!({"metadata": {"annotations": {"test/poke": self.pokes.to_string()}}}),
        );
        self.cronjobs(ns)
            .patch(name, &PatchParams::default(), &poke)
            .await
            .unwrap();
    }
}

async fn create(env: &Env, ns: &str, name: &str, extra: Value) {
    let mut spec = json!({
        "schedule": "* * * * *",
        "jobTemplate": {"metadata": {"labels": {"from": "cron"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}]}}}},
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let cj: CronJob =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    env.cronjobs(ns)
        .create(&PostParams::default(), &cj)
        .await
        .unwrap();
}

/// Polls until the namespace's Jobs satisfy `cond`; returns them sorted
/// by name.
async fn jobs_where(env: &Env, ns: &str, what: &str, cond: impl Fn(&[Job]) -> bool) -> Vec<Job> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut jobs = env
            .jobs(ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        jobs.retain(|j| j.metadata.deletion_timestamp.is_none());
        jobs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if cond(&jobs) {
            return jobs;
        }
        let names: Vec<_> = jobs
            .iter()
            .map(|j| j.metadata.name.clone().unwrap())
            .collect();
        assert!(
            tokio::time::Instant::now() < deadline,
            "jobs never {what}: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn cronjob_where(
    env: &Env,
    ns: &str,
    name: &str,
    what: &str,
    cond: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let cj = serde_json::to_value(env.cronjobs(ns).get(name).await.unwrap()).unwrap();
        if cond(&cj) {
            return cj;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cronjob never {what}: {:#}",
            cj["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn has_event(env: &Env, ns: &str, reason: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let events = Api::<Event>::namespaced(env.client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap();
        if events
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some(reason))
        {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "no {reason} event");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the CronJob's status lists `job` as active.
async fn until_active(env: &Env, ns: &str, name: &str, job: &str) {
    cronjob_where(env, ns, name, "recorded the job as active", |c| {
        c["status"]["active"]
            .as_array()
            .is_some_and(|a| a.iter().any(|r| r["name"] == job))
    })
    .await;
}

/// Acts as the Job controller: the Job finished (`Complete` or `Failed`).
async fn finish(env: &Env, ns: &str, name: &str, how: &str, started: Timestamp) {
    let t = started.to_string();
    let conditions = if how == "Complete" {
        json!([
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": t},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods", "lastTransitionTime": t},
        ])
    } else {
        json!([
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": t},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": t},
        ])
    };
    let mut status = json!({"startTime": t, "conditions": conditions,
        "uncountedTerminatedPods": {}});
    if how == "Complete" {
        status["completionTime"] = json!(t);
        status["succeeded"] = json!(1);
    } else {
        status["failed"] = json!(1);
    }
    env.jobs(ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap();
}

fn minutes(t: &Value) -> i64 {
    t.as_str()
        .unwrap()
        .parse::<Timestamp>()
        .unwrap()
        .as_second()
        / 60
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cronjob_fires_on_schedule_and_forbid_waits() {
    let ns = "forbid";
    let mut env = Env::start(ns).await;
    create(&env, ns, "tick", json!({"concurrencyPolicy": "Forbid"})).await;
    // Nothing is due before the first minute passes.
    let cj = cronjob_where(&env, ns, "tick", "seen", |c| c["status"].is_object()).await;
    assert!(cj["status"]["lastScheduleTime"].is_null());
    env.advance(ns, "tick", Duration::from_secs(61)).await;
    let jobs = jobs_where(&env, ns, "one created", |j| j.len() == 1).await;
    let cj = cronjob_where(&env, ns, "tick", "active", |c| {
        c["status"]["active"]
            .as_array()
            .is_some_and(|a| a.len() == 1)
    })
    .await;
    let scheduled = &cj["status"]["lastScheduleTime"];
    let job = &jobs[0];
    assert_eq!(
        job.metadata.name.as_deref(),
        Some(format!("tick-{}", minutes(scheduled)).as_str())
    );
    let annotations = job.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"]
            .parse::<Timestamp>()
            .unwrap(),
        scheduled.as_str().unwrap().parse::<Timestamp>().unwrap()
    );
    assert_eq!(job.metadata.labels.as_ref().unwrap()["from"], "cron");
    let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("CronJob", Some(true))
    );
    assert_eq!(
        cj["status"]["active"][0]["name"],
        job.metadata.name.clone().unwrap()
    );
    has_event(&env, ns, "SuccessfulCreate").await;

    // The next minute: the first Job still runs, so Forbid starts none.
    env.advance(ns, "tick", Duration::from_secs(60)).await;
    has_event(&env, ns, "JobAlreadyActive").await;
    assert_eq!(
        env.jobs(ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // Once it completed, the start Forbid held back runs (it is still
    // within its window).
    let first = job.metadata.name.clone().unwrap();
    finish(&env, ns, &first, "Complete", Timestamp::now()).await;
    let cj = cronjob_where(&env, ns, "tick", "started the held-back run", |c| {
        c["status"]["lastSuccessfulTime"].is_string()
            && c["status"]["active"]
                .as_array()
                .is_some_and(|a| a.len() == 1 && a[0]["name"] != first.as_str())
    })
    .await;
    has_event(&env, ns, "SawCompletedJob").await;
    let second = format!("tick-{}", minutes(&cj["status"]["lastScheduleTime"]));
    assert_eq!(cj["status"]["active"][0]["name"], second.as_str());
    let jobs = jobs_where(&env, ns, "a second created", |j| j.len() == 2).await;
    assert!(jobs
        .iter()
        .any(|j| j.metadata.name.as_deref() == Some(second.as_str())));
    env.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_deletes_the_running_job() {
    let ns = "replace";
    let mut env = Env::start(ns).await;
    create(&env, ns, "tock", json!({"concurrencyPolicy": "Replace"})).await;
    env.advance(ns, "tock", Duration::from_secs(61)).await;
    let first = jobs_where(&env, ns, "one created", |j| j.len() == 1).await;
    let first = first[0].metadata.name.clone().unwrap();
    until_active(&env, ns, "tock", &first).await;
    env.advance(ns, "tock", Duration::from_secs(60)).await;
    let jobs = jobs_where(&env, ns, "replaced", |j| {
        j.len() == 1 && j[0].metadata.name.as_deref() != Some(first.as_str())
    })
    .await;
    let cj = cronjob_where(&env, ns, "tock", "tracking the new job", |c| {
        c["status"]["active"]
            .as_array()
            .is_some_and(|a| a.len() == 1 && a[0]["name"] == jobs[0].metadata.name.clone().unwrap())
    })
    .await;
    assert_eq!(
        jobs[0].metadata.name.clone().unwrap(),
        format!("tock-{}", minutes(&cj["status"]["lastScheduleTime"]))
    );
    has_event(&env, ns, "SuccessfulDelete").await;
    env.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_beyond_the_history_limits_are_deleted() {
    let ns = "history";
    let mut env = Env::start(ns).await;
    create(
        &env,
        ns,
        "keep",
        json!({"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1}),
    )
    .await;
    let base = Timestamp::now();
    let mut names = Vec::new();
    for (i, how) in ["Complete", "Complete", "Failed", "Failed"]
        .iter()
        .enumerate()
    {
        env.advance(
            ns,
            "keep",
            Duration::from_secs(if i == 0 { 61 } else { 60 }),
        )
        .await;
        let jobs = jobs_where(&env, ns, "created", |j| {
            j.iter().any(|j| {
                !names.contains(j.metadata.name.as_ref().unwrap())
                    && j.status.as_ref().is_none_or(|s| s.conditions.is_none())
            })
        })
        .await;
        let new = jobs
            .iter()
            .find(|j| !names.contains(j.metadata.name.as_ref().unwrap()))
            .unwrap()
            .metadata
            .name
            .clone()
            .unwrap();
        until_active(&env, ns, "keep", &new).await;
        let started = base + Duration::from_secs(u64::try_from(i).unwrap() * 60);
        finish(&env, ns, &new, how, started).await;
        names.push(new);
    }
    // One of each kind is left: the newest.
    let left = jobs_where(&env, ns, "cut to the limits", |j| j.len() == 2).await;
    let left: Vec<String> = left
        .iter()
        .map(|j| j.metadata.name.clone().unwrap())
        .collect();
    let mut want = vec![names[1].clone(), names[3].clone()];
    want.sort();
    assert_eq!(left, want);
    env.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_starts_suspend_and_manual_jobs() {
    let ns = "missed";
    let mut env = Env::start(ns).await;
    // Suspended: nothing starts, however late it is. Not suspended and
    // more than 100 starts missed: a warning, and only the latest runs.
    create(&env, ns, "paused", json!({"suspend": true})).await;
    create(&env, ns, "late", json!({})).await;
    cronjob_where(&env, ns, "late", "seen", |c| c["status"].is_object()).await;
    cronjob_where(&env, ns, "paused", "seen", |c| c["status"].is_object()).await;
    env.advance(ns, "late", Duration::from_secs(200 * 60)).await;
    env.advance(ns, "paused", Duration::ZERO).await;
    has_event(&env, ns, "TooManyMissedTimes").await;
    let cj = cronjob_where(&env, ns, "late", "scheduled", |c| {
        c["status"]["lastScheduleTime"].is_string()
    })
    .await;
    let jobs = jobs_where(&env, ns, "one started", |j| j.len() == 1).await;
    let last = cj["status"]["lastScheduleTime"]
        .as_str()
        .unwrap()
        .parse::<Timestamp>()
        .unwrap();
    let now = *env.now.lock().unwrap();
    assert!(
        now.duration_since(last) < jiff_secs(60),
        "{last} is not the latest start before {now}"
    );
    assert_eq!(
        jobs[0].metadata.name.clone().unwrap(),
        format!("late-{}", last.as_second() / 60)
    );
    let paused = cronjob_where(&env, ns, "paused", "poked", |c| {
        c["metadata"]["annotations"]["test/poke"] == "2"
    })
    .await;
    assert!(paused["status"]["lastScheduleTime"].is_null());

    // A Job made by hand from the CronJob (`kubectl create job --from`):
    // the controller warns about it and leaves it be.
    let uid = env
        .cronjobs(ns)
        .get("late")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let manual: Job = serde_json::from_value(json!({
        "metadata": {"name": "late-manual", "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "late", "uid": uid, "controller": true}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}},
    }))
    .unwrap();
    env.jobs(ns)
        .create(&PostParams::default(), &manual)
        .await
        .unwrap();
    has_event(&env, ns, "UnexpectedJob").await;
    let jobs = jobs_where(&env, ns, "kept the manual job", |j| j.len() == 2).await;
    assert!(jobs
        .iter()
        .any(|j| j.metadata.name.as_deref() == Some("late-manual")));
    env.stop.cancel();
}

fn jiff_secs(n: i64) -> k8s_openapi::jiff::SignedDuration {
    k8s_openapi::jiff::SignedDuration::from_secs(n)
}
