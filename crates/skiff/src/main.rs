//! The `skiff` binary: parses the command line and hands off to the
//! component crates. Wiring only; no logic of its own lives here.

mod agent;
mod bootstrap_data;
mod certs;
mod cli;
mod cluster_dns;
mod controller_manager;
mod default_storage_class;
mod explain;
mod logs;
mod node_role;
mod reset;
mod scheduler;
mod secure_port;
mod server;
mod sim;
mod token;

use clap::Parser;

/// jemalloc: see the workspace manifest for what it was measured against,
/// and this crate's for its background thread.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    // Several rustls providers may be compiled in; the kube client needs
    // one chosen explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    init_logging(&cli.command);
    match cli.command {
        cli::Command::Version => {
            println!("{}", cli::version_line());
            Ok(())
        }
        cli::Command::Kubeconfig(args) => {
            let path = args.data_dir.join("admin.kubeconfig");
            let text = std::fs::read_to_string(&path).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read {} (has skiff server run?): {e}",
                    path.display()
                )
            })?;
            let Some(user) = &args.user else {
                print!("{text}");
                return Ok(());
            };
            anyhow::ensure!(!user.is_empty(), "--user: must not be empty");
            let server = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("server: "))
                .ok_or_else(|| anyhow::anyhow!("no server in {}", path.display()))?;
            let groups: Vec<&str> = args.groups.iter().map(String::as_str).collect();
            let config = skiff_apiserver::serve::pki::user_kubeconfig(
                &args.data_dir.join("pki"),
                server,
                user,
                &groups,
                args.validity_period,
            )?;
            print!("{config}");
            Ok(())
        }
        cli::Command::Scheduler(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("skiff")
                .build()?;
            runtime.block_on(scheduler::run(args))
        }
        cli::Command::ControllerManager(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("skiff")
                .build()?;
            runtime.block_on(controller_manager::run(args))
        }
        cli::Command::Agent(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("skiff")
                .build()?;
            runtime.block_on(agent::run(args))
        }
        cli::Command::Reset(args) => reset::run(args),
        cli::Command::Logs(args) => Ok(logs::print(
            &args.data_dir,
            args.which,
            args.tail,
            args.follow,
        )?),
        cli::Command::Certs(command) => certs::run(command),
        cli::Command::Explain(args) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let code = match runtime.block_on(explain::run(args)) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    explain::FAILED
                }
            };
            std::process::exit(code)
        }
        cli::Command::Token(args) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(token::run(args))
        }
        cli::Command::Sim(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("skiff-sim")
                .build()?;
            runtime.block_on(sim::run(args))
        }
        cli::Command::Server(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("skiff")
                .build()?;
            runtime.block_on(server::run(*args))
        }
    }
}

/// Logs to stderr, and the node agent's lines also to its own file
/// ([`logs::AgentLog`], what `skiff logs agent` prints): everything of a
/// `skiff agent`, the agent's crates' lines of a `skiff server`.
fn init_logging(command: &cli::Command) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let filter = || {
        tracing_subscriber::EnvFilter::try_from_env("SKIFF_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
    };
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // A closed stderr (`skiff server 2>&1 | head`) must not turn the
        // next log line into a panic: tracing-subscriber reports failed
        // writes with `eprintln!`, which panics when stderr is gone.
        .log_internal_errors(false)
        .with_filter(filter());
    let (dir, agent_only) = match command {
        cli::Command::Server(args) if !args.disable_agent => {
            (Some(args.data_dir.join("node")), true)
        }
        cli::Command::Agent(args) => (Some(args.data_dir.clone()), false),
        _ => (None, false),
    };
    let joining = matches!(command, cli::Command::Agent(args) if args.kubeconfig.is_none());
    let file = dir.map(|dir| match joining {
        true => logs::AgentLog::in_existing_dir(&dir),
        false => logs::AgentLog::new(&dir),
    });
    let file = file.map(|log| {
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(log)
            .log_internal_errors(false)
            .with_filter(filter())
            .with_filter(tracing_subscriber::filter::filter_fn(move |meta| {
                !agent_only
                    || ["skiff_node", "skiff_proxy", "skiff_dns"]
                        .iter()
                        .any(|t| meta.target().starts_with(t))
            }))
    });
    tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .init();
}
