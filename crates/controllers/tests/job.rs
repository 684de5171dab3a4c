//! The Job and TTL-after-finished controllers against a real in-process
//! API server. There is no kubelet: the tests finish pods by patching
//! their status (phase, container exit codes) as a kubelet would. Each
//! test runs its scenarios in namespaces of their own on one server.

mod support;

use support::namespace;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

async fn create_job(client: &Client, ns: &str, name: &str, spec: Value) -> Api<Job> {
    let mut spec = spec;
    spec["template"] = json!({"spec": {"containers": [{"name": "main", "image": "busybox"}]}});
    let job: Job =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &job).await.unwrap();
    api
}

/// Polls until `cond` holds for the Job (as JSON), or fails the test.
async fn job_where(api: &Api<Job>, name: &str, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let job = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
        if cond(&job) {
            return job;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {name} never {what}: {:#}",
            job["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls until the Job's pods that are not finished or being deleted
/// number `n`; returns them sorted by name.
async fn running_pods(client: &Client, ns: &str, job: &str, n: usize) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut pods: Vec<Pod> = api
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .is_none_or(|ph| ph != "Succeeded" && ph != "Failed")
            })
            .collect();
        if pods.len() == n {
            pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            return pods;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {job} never had {n} running pods (has {})",
            pods.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Acts as the kubelet: the pod's container exited with `code`.
async fn finish(client: &Client, pod: &Pod, code: i32) {
    let ns = pod.metadata.namespace.as_deref().unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let phase = if code == 0 { "Succeeded" } else { "Failed" };
    let status = json!({"status": {"phase": phase, "containerStatuses": [{
        "name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
            "finishedAt": k8s_openapi::jiff::Timestamp::now().to_string()}},
    }]}});
    api.patch_status(
        pod.metadata.name.as_deref().unwrap(),
        &PatchParams::default(),
        &Patch::Merge(status),
    )
    .await
    .unwrap();
}

fn condition<'a>(job: &'a Value, type_: &str) -> Option<&'a Value> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == "True")
}

fn condition_types(job: &Value) -> Vec<String> {
    job["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["type"].as_str().unwrap().to_string())
        .collect()
}

async fn event_reasons(client: &Client, ns: &str, job: &str) -> BTreeSet<String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let events = Api::<Event>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap();
        let reasons: BTreeSet<String> = events
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(job))
            .filter_map(|e| e.reason)
            .collect();
        if reasons.contains("Completed")
            || reasons
                .iter()
                .any(|r| r.ends_with("Exceeded") || r == "PodFailurePolicy")
        {
            return reasons;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no final event for {job}: {reasons:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_to_completion() {
    let (_server, client, stop) = support::start(&["job", "ttl-after-finished"]).await;

    // NonIndexed: three completions, two at a time.
    namespace(&client, "plain").await;
    let jobs = create_job(
        &client,
        "plain",
        "work",
        json!({"completions": 3, "parallelism": 2}),
    )
    .await;
    let pods = running_pods(&client, "plain", "work", 2).await;
    for p in &pods {
        let meta = &p.metadata;
        assert!(meta
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&"batch.kubernetes.io/job-tracking".to_string()));
        let owner = &meta.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("Job", Some(true), Some(true))
        );
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels["job-name"], "work");
        assert!(labels.contains_key("batch.kubernetes.io/controller-uid"));
    }
    job_where(&jobs, "work", "counted two active pods", |j| {
        j["status"]["active"] == 2 && j["status"]["startTime"].is_string()
    })
    .await;
    finish(&client, &pods[0], 0).await;
    finish(&client, &pods[1], 0).await;
    job_where(&jobs, "work", "counted two successes", |j| {
        j["status"]["succeeded"] == 2
    })
    .await;
    let third = running_pods(&client, "plain", "work", 1).await;
    finish(&client, &third[0], 0).await;
    let job = job_where(&jobs, "work", "completed", |j| {
        condition(j, "Complete").is_some()
    })
    .await;
    assert_eq!(job["status"]["succeeded"], 3);
    assert_eq!(job["status"]["failed"], 0);
    assert_eq!(job["status"]["active"], 0);
    assert!(job["status"]["completionTime"].is_string());
    assert_eq!(condition_types(&job), ["SuccessCriteriaMet", "Complete"]);
    assert_eq!(
        condition(&job, "Complete").unwrap()["reason"],
        "CompletionsReached"
    );
    let uncounted = &job["status"]["uncountedTerminatedPods"];
    assert!(
        uncounted["succeeded"].as_array().is_none_or(Vec::is_empty),
        "{uncounted}"
    );
    // Every pod was counted and let go.
    let all = Api::<Pod>::namespaced(client.clone(), "plain")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(all.items.len(), 3);
    assert!(all
        .items
        .iter()
        .all(|p| p.metadata.finalizers.as_ref().is_none_or(Vec::is_empty)));
    let reasons = event_reasons(&client, "plain", "work").await;
    assert!(
        reasons.contains("SuccessfulCreate") && reasons.contains("Completed"),
        "{reasons:?}"
    );

    // Indexed: one pod per index, each told its index.
    namespace(&client, "indexed").await;
    let jobs = create_job(
        &client,
        "indexed",
        "ix",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
    )
    .await;
    let pods = running_pods(&client, "indexed", "ix", 3).await;
    let mut seen = BTreeSet::new();
    for p in &pods {
        let index = p.metadata.annotations.as_ref().unwrap()
            ["batch.kubernetes.io/job-completion-index"]
            .clone();
        assert_eq!(
            p.metadata.labels.as_ref().unwrap()["batch.kubernetes.io/job-completion-index"],
            index
        );
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(
            spec.hostname.as_deref(),
            Some(format!("ix-{index}").as_str())
        );
        let env = spec.containers[0].env.as_ref().unwrap();
        assert!(env.iter().any(|e| e.name == "JOB_COMPLETION_INDEX"));
        assert!(p
            .metadata
            .name
            .as_ref()
            .unwrap()
            .starts_with(&format!("ix-{index}-")));
        seen.insert(index);
    }
    assert_eq!(
        seen,
        BTreeSet::from(["0".to_string(), "1".into(), "2".into()])
    );
    let by_index = |i: &str| {
        pods.iter()
            .find(|p| {
                p.metadata.annotations.as_ref().unwrap()["batch.kubernetes.io/job-completion-index"]
                    == i
            })
            .unwrap()
    };
    finish(&client, by_index("2"), 0).await;
    job_where(&jobs, "ix", "completed index 2", |j| {
        j["status"]["completedIndexes"] == "2"
    })
    .await;
    finish(&client, by_index("0"), 0).await;
    finish(&client, by_index("1"), 0).await;
    let job = job_where(&jobs, "ix", "completed", |j| {
        condition(j, "Complete").is_some()
    })
    .await;
    assert_eq!(job["status"]["completedIndexes"], "0-2");
    assert_eq!(job["status"]["succeeded"], 3);

    // A work queue (parallelism, no completions): once one pod succeeded
    // no more start, and the Job completes when the others are done.
    namespace(&client, "queue").await;
    let jobs = create_job(&client, "queue", "drain", json!({"parallelism": 2})).await;
    assert_eq!(
        jobs.get("drain").await.unwrap().spec.unwrap().completions,
        None
    );
    let pods = running_pods(&client, "queue", "drain", 2).await;
    finish(&client, &pods[0], 0).await;
    let job = job_where(&jobs, "drain", "counted the success", |j| {
        j["status"]["succeeded"] == 1
    })
    .await;
    assert!(condition(&job, "Complete").is_none());
    running_pods(&client, "queue", "drain", 1).await;
    finish(&client, &pods[1], 0).await;
    let job = job_where(&jobs, "drain", "completed", |j| {
        condition(j, "Complete").is_some()
    })
    .await;
    assert_eq!(job["status"]["succeeded"], 2);

    // successPolicy: index 0 succeeding is enough; the rest are deleted.
    namespace(&client, "leader").await;
    let jobs = create_job(
        &client,
        "leader",
        "lead",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
            "successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
    )
    .await;
    let pods = running_pods(&client, "leader", "lead", 3).await;
    let leader = pods
        .iter()
        .find(|p| {
            p.metadata.annotations.as_ref().unwrap()["batch.kubernetes.io/job-completion-index"]
                == "0"
        })
        .unwrap();
    finish(&client, leader, 0).await;
    let job = job_where(&jobs, "lead", "completed", |j| {
        condition(j, "Complete").is_some()
    })
    .await;
    assert_eq!(condition_types(&job), ["SuccessCriteriaMet", "Complete"]);
    let complete = condition(&job, "Complete").unwrap();
    assert_eq!(
        (complete["reason"].as_str(), complete["message"].as_str()),
        (Some("SuccessPolicy"), Some("Matched rules at index 0"))
    );
    assert_eq!(job["status"]["completedIndexes"], "0");
    running_pods(&client, "leader", "lead", 0).await;

    // A Job another controller manages is left alone.
    namespace(&client, "managed").await;
    let jobs = create_job(
        &client,
        "managed",
        "theirs",
        json!({"managedBy": "example.com/batch"}),
    )
    .await;
    let mine = create_job(&client, "managed", "mine", json!({})).await;
    running_pods(&client, "managed", "mine", 1).await;
    job_where(&mine, "mine", "counted its pod", |j| {
        j["status"]["active"] == 1
    })
    .await;
    let theirs = jobs.get("theirs").await.unwrap();
    assert!(theirs
        .status
        .is_none_or(|s| s.active.is_none() && s.start_time.is_none()));
    running_pods(&client, "managed", "theirs", 0).await;

    // ttlSecondsAfterFinished: 0 deletes the Job once it finished.
    namespace(&client, "ttl").await;
    let jobs = create_job(
        &client,
        "ttl",
        "brief",
        json!({"ttlSecondsAfterFinished": 0}),
    )
    .await;
    let pods = running_pods(&client, "ttl", "brief", 1).await;
    finish(&client, &pods[0], 0).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while jobs.get_opt("brief").await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the finished job was never deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_fail() {
    let (_server, client, stop) = support::start(&["job", "ttl-after-finished"]).await;

    // backoffLimit 1: the second failure fails the Job.
    namespace(&client, "backoff").await;
    let jobs = create_job(
        &client,
        "backoff",
        "flaky",
        json!({"completions": 2, "parallelism": 2, "backoffLimit": 1}),
    )
    .await;
    let pods = running_pods(&client, "backoff", "flaky", 2).await;
    finish(&client, &pods[0], 1).await;
    finish(&client, &pods[1], 1).await;
    let job = job_where(&jobs, "flaky", "failed", |j| {
        condition(j, "Failed").is_some()
    })
    .await;
    assert_eq!(condition_types(&job), ["FailureTarget", "Failed"]);
    let failed = condition(&job, "Failed").unwrap();
    assert_eq!(failed["reason"], "BackoffLimitExceeded");
    assert_eq!(
        failed["message"],
        "Job has reached the specified backoff limit"
    );
    assert_eq!(job["status"]["failed"], 2);
    assert!(job["status"]["completionTime"].is_null());
    let reasons = event_reasons(&client, "backoff", "flaky").await;
    assert!(reasons.contains("BackoffLimitExceeded"), "{reasons:?}");

    // podFailurePolicy: exit code 42 fails the Job at once; the other
    // pod is deleted.
    namespace(&client, "policy").await;
    let jobs = create_job(
        &client,
        "policy",
        "strict",
        json!({"completions": 2, "parallelism": 2, "backoffLimit": 6, "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        ]}}),
    )
    .await;
    let pods = running_pods(&client, "policy", "strict", 2).await;
    finish(&client, &pods[0], 42).await;
    let job = job_where(&jobs, "strict", "failed", |j| {
        condition(j, "Failed").is_some()
    })
    .await;
    let failed = condition(&job, "Failed").unwrap();
    assert_eq!(failed["reason"], "PodFailurePolicy");
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.starts_with("Container main for pod policy/")
            && message.ends_with("failed with exit code 42 matching FailJob rule at index 0"),
        "{message}"
    );
    assert_eq!(job["status"]["active"], 0);
    running_pods(&client, "policy", "strict", 0).await;

    // backoffLimitPerIndex 0: a failed index is not retried; the Job
    // fails once every index succeeded or failed.
    namespace(&client, "perindex").await;
    let jobs = create_job(
        &client,
        "perindex",
        "each",
        json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed", "backoffLimitPerIndex": 0}),
    )
    .await;
    let created = jobs.get("each").await.unwrap();
    assert_eq!(created.spec.unwrap().backoff_limit, Some(i32::MAX));
    let pods = running_pods(&client, "perindex", "each", 2).await;
    let by_index = |i: &str| {
        pods.iter()
            .find(|p| {
                p.metadata.annotations.as_ref().unwrap()["batch.kubernetes.io/job-completion-index"]
                    == i
            })
            .unwrap()
    };
    assert_eq!(
        by_index("0").metadata.annotations.as_ref().unwrap()
            ["batch.kubernetes.io/job-index-failure-count"],
        "0"
    );
    finish(&client, by_index("0"), 1).await;
    job_where(&jobs, "each", "failed index 0", |j| {
        j["status"]["failedIndexes"] == "0"
    })
    .await;
    finish(&client, by_index("1"), 0).await;
    let job = job_where(&jobs, "each", "failed", |j| {
        condition(j, "Failed").is_some()
    })
    .await;
    assert_eq!(
        condition(&job, "Failed").unwrap()["reason"],
        "FailedIndexes"
    );
    assert_eq!(
        condition(&job, "Failed").unwrap()["message"],
        "Job has failed indexes"
    );
    assert_eq!(
        (
            job["status"]["completedIndexes"].as_str(),
            job["status"]["failedIndexes"].as_str()
        ),
        (Some("1"), Some("0"))
    );

    // maxFailedIndexes 0: the first failed index fails the Job.
    let jobs = create_job(
        &client,
        "perindex",
        "strictest",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
            "backoffLimitPerIndex": 0, "maxFailedIndexes": 0}),
    )
    .await;
    let pods = running_pods(&client, "perindex", "strictest", 3).await;
    finish(&client, &pods[0], 1).await;
    let job = job_where(&jobs, "strictest", "failed", |j| {
        condition(j, "Failed").is_some()
    })
    .await;
    assert_eq!(
        condition(&job, "Failed").unwrap()["reason"],
        "MaxFailedIndexesExceeded"
    );
    running_pods(&client, "perindex", "strictest", 0).await;

    // activeDeadlineSeconds: the Job fails when it has run that long.
    namespace(&client, "deadline").await;
    let jobs = create_job(
        &client,
        "deadline",
        "slow",
        json!({"activeDeadlineSeconds": 1, "parallelism": 1}),
    )
    .await;
    running_pods(&client, "deadline", "slow", 1).await;
    let job = job_where(&jobs, "slow", "failed", |j| {
        condition(j, "Failed").is_some()
    })
    .await;
    assert_eq!(
        condition(&job, "Failed").unwrap()["reason"],
        "DeadlineExceeded"
    );
    assert_eq!(
        condition(&job, "Failed").unwrap()["message"],
        "Job was active longer than specified deadline"
    );
    running_pods(&client, "deadline", "slow", 0).await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_suspend_and_resume() {
    let (_server, client, stop) = support::start(&["job", "ttl-after-finished"]).await;
    namespace(&client, "suspend").await;
    let jobs = create_job(
        &client,
        "suspend",
        "later",
        json!({"suspend": true, "completions": 2, "parallelism": 2}),
    )
    .await;
    let job = job_where(&jobs, "later", "suspended", |j| {
        condition(j, "Suspended").is_some()
    })
    .await;
    assert_eq!(
        condition(&job, "Suspended").unwrap()["reason"],
        "JobSuspended"
    );
    assert!(job["status"]["startTime"].is_null());
    running_pods(&client, "suspend", "later", 0).await;

    let resume = Patch::Merge(json!({"spec": {"suspend": false}}));
    jobs.patch("later", &PatchParams::default(), &resume)
        .await
        .unwrap();
    running_pods(&client, "suspend", "later", 2).await;
    let job = job_where(&jobs, "later", "resumed", |j| {
        j["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "Suspended" && c["status"] == "False" && c["reason"] == "JobResumed"
            })
        }) && j["status"]["startTime"].is_string()
    })
    .await;
    assert_eq!(job["status"]["active"], 2);

    let suspend = Patch::Merge(json!({"spec": {"suspend": true}}));
    jobs.patch("later", &PatchParams::default(), &suspend)
        .await
        .unwrap();
    running_pods(&client, "suspend", "later", 0).await;
    let job = job_where(&jobs, "later", "suspended again", |j| {
        condition(j, "Suspended").is_some() && j["status"]["active"] == 0
    })
    .await;
    // Pods deleted for suspension are not failures.
    assert_eq!(job["status"]["failed"], 0);

    // A deleted Job's pods are let go: deleting one is not held up by
    // the tracking finalizer.
    jobs.patch("later", &PatchParams::default(), &resume)
        .await
        .unwrap();
    let pods = running_pods(&client, "suspend", "later", 2).await;
    jobs.delete("later", &DeleteParams::background())
        .await
        .unwrap();
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "suspend");
    let name = pods[0].metadata.name.clone().unwrap();
    pod_api
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while pod_api.get_opt(&name).await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the orphan pod kept its finalizer"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
}
