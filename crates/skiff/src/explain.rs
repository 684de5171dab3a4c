//! `skiff explain [KIND] NAME`: why a pod (or a workload's newest
//! unavailable pod, or a Service's) is not Ready. The command line only:
//! reading and diagnosing are skiff-explain's.

use std::str::FromStr;

use skiff_explain::Target;

use crate::cli::{ExplainArgs, ExplainOutput};

/// Exit status when the explanation found a problem.
pub const FOUND_PROBLEM: i32 = 1;
/// Exit status when no explanation could be made (bad target, not found,
/// API unreachable).
pub const FAILED: i32 = 2;

/// The target from `KIND NAME`, `KIND/NAME` or `NAME`.
fn target(words: &[String]) -> Result<Target, skiff_explain::Error> {
    match words {
        [one] => Target::from_str(one),
        [kind, name] => Target::from_str(&format!("{kind}/{name}")),
        _ => Err(skiff_explain::Error::BadTarget(words.join(" "))),
    }
}

/// Runs the command; the exit status is 0 when healthy, [`FOUND_PROBLEM`]
/// when a problem was found.
pub async fn run(args: ExplainArgs) -> anyhow::Result<i32> {
    let target = target(&args.target)?;
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::infer().await?,
    };
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = kube::Client::try_from(config)?;
    let report = skiff_explain::explain(&client, &namespace, &target).await?;
    match args.output {
        ExplainOutput::Human => print!("{}", report.human()),
        ExplainOutput::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(if report.healthy() { 0 } else { FOUND_PROBLEM })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_and_name_as_one_or_two_words() {
        let w = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            target(&w(&["pod", "web"])).unwrap(),
            Target::Pod("web".into())
        );
        assert_eq!(
            target(&w(&["deploy/web"])).unwrap(),
            Target::Deployment("web".into())
        );
        assert_eq!(target(&w(&["web"])).unwrap(), Target::Pod("web".into()));
        assert!(target(&w(&["a", "b", "c"])).is_err());
    }
}
