//! Runs one parsed command: each verb's requests, then its text and verdict.

use std::path::PathBuf;

use clap::CommandFactory;
use opm_operator::commands::render_cmd::RenderArgs;

use crate::error::{CliError, Verdict};
use crate::output::{self, Format, Out};
use crate::{Cli, Command, One};
use crate::{connect, control, diff, events, get, releases, report, target, tree, why};

type Ran = Result<(String, Verdict), CliError>;

fn ok(s: String) -> Ran {
    Ok((s, Verdict::Ok))
}

/// The command's output and verdict; an error is exit 2.
pub(crate) async fn run(command: Command) -> Ran {
    match command {
        Command::Get {
            target,
            watch,
            conn,
            out,
        } => {
            let t = target::parse(&target)?;
            let s = conn.session().await?;
            if watch {
                return ok(get::watch(&s, t, out.format).await?);
            }
            ok(get::run(&s, t, out.format).await?)
        }
        Command::Tree { one, out } => tree_cmd(&one, &out).await,
        Command::Events { one, out } => events_cmd(&one, &out).await,
        Command::Why { one, out } => why_cmd(&one, &out).await,
        Command::Reconcile {
            one,
            wait,
            timeout,
            with_source,
        } => {
            let (s, key) = session_key(&one).await?;
            let opts = control::ReconcileOpts {
                wait,
                timeout,
                with_source,
            };
            control::reconcile(&s, &key, &opts).await
        }
        Command::Suspend { one } => {
            let (s, key) = session_key(&one).await?;
            ok(control::set_suspend(&s, &key, true).await?)
        }
        Command::Resume { one } => {
            let (s, key) = session_key(&one).await?;
            ok(control::set_suspend(&s, &key, false).await?)
        }
        Command::Diff {
            one,
            values,
            version,
            path,
            as_release,
            service_account,
            cache_dir,
            platform,
            cue,
            out,
        } => {
            let opts = diff::DiffOpts {
                values,
                version,
                path,
                as_release,
                service_account,
                cue,
                cache_dir,
                platform,
            };
            diff_cmd(&one, &opts, &out).await
        }
        Command::Render {
            args,
            kubeconfig,
            context,
        } => render_cmd(args, kubeconfig, context).await,
        Command::Completion { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "kubectl-opm", &mut buf);
            ok(String::from_utf8_lossy(&buf).into_owned())
        }
    }
}

async fn tree_cmd(one: &One, out: &Out) -> Ran {
    let (s, key) = session_key(one).await?;
    let obj = releases::read(&s.client, &key).await?;
    let t = tree::build(&s, &obj).await?;
    ok(match out.format {
        Format::Yaml | Format::Json => output::structured(&t, out.format)?,
        _ => tree::text(&t),
    })
}

async fn why_cmd(one: &One, out: &Out) -> Ran {
    let (s, key) = session_key(one).await?;
    let obj = releases::read(&s.client, &key).await?;
    let w = why::explain(&obj, jiff::Timestamp::now());
    ok(match out.format {
        Format::Yaml | Format::Json => output::structured(&w, out.format)?,
        _ => why::text(&w),
    })
}

async fn events_cmd(one: &One, out: &Out) -> Ran {
    let (s, key) = session_key(one).await?;
    releases::read(&s.client, &key).await?;
    let evs = events::list(&s, &key).await?;
    if evs.is_empty() && matches!(out.format, Format::Table | Format::Wide) {
        eprintln!("No events found for {}.", releases::describe(&key));
        return ok(String::new());
    }
    ok(events::render(&evs, out.format, jiff::Timestamp::now())?)
}

/// Exit 1 when the proposal changes anything.
async fn diff_cmd(one: &One, opts: &diff::DiffOpts, out: &Out) -> Ran {
    let (s, key) = session_key(one).await?;
    let report = diff::run(&s, &key, opts).await?;
    let text = match out.format {
        Format::Yaml | Format::Json => output::structured(&report, out.format)?,
        _ => report::text(&report),
    };
    let verdict = if report.has_changes() {
        Verdict::Failed
    } else {
        Verdict::Ok
    };
    Ok((text, verdict))
}

async fn render_cmd(
    mut args: Box<RenderArgs>,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
) -> Ran {
    // SPEC §30: the cluster's Platform by default. Written to a private file the
    // render reads like --platform's; no cluster, or no Platform there, leaves
    // plain modules rendering and OPM ones asking for --platform.
    let platform_file = match &args.platform {
        Some(_) => None,
        None => cluster_platform(kubeconfig, context).await,
    };
    if let Some(f) = &platform_file {
        args.platform = Some(f.path().to_path_buf());
    }
    let text = opm_operator::commands::render_cmd::render(&args)
        .await
        .map_err(|e| CliError::Other(format!("{e:#}")))?;
    ok(text)
}

/// The cluster's Platform `cluster`, written to a temporary file, when a kubeconfig
/// reaches a cluster that has one within a few seconds.
async fn cluster_platform(
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
) -> Option<tempfile::NamedTempFile> {
    let conn = connect::Conn {
        kubeconfig,
        context,
        ..Default::default()
    };
    let read = async {
        let s = conn.session().await.ok()?;
        let api = kube::Api::<opm_core::api::platform::Platform>::all(s.client);
        api.get_opt(opm_core::api::platform::PLATFORM_NAME)
            .await
            .ok()
            .flatten()
    };
    let platform = tokio::time::timeout(std::time::Duration::from_secs(5), read)
        .await
        .ok()
        .flatten()?;
    let mut file = tempfile::NamedTempFile::new().ok()?;
    serde_json::to_writer(&mut file, &platform).ok()?;
    Some(file)
}

async fn session_key(one: &One) -> Result<(connect::Session, opm_core::ReleaseKey), CliError> {
    let (kind, name) = target::one(&one.target)?;
    if one.conn.all_namespaces {
        return Err(CliError::Usage(
            "-A/--all-namespaces applies to get only; name the namespace with -n".into(),
        ));
    }
    let s = one.conn.session().await?;
    let key = control::key(&s, kind, &name);
    Ok((s, key))
}
