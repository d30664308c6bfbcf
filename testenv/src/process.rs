//! Child processes (the API server, the CUE registry) that must never outlive the test
//! binary.
//!
//! Two mechanisms, because either alone leaves strays:
//! - an `atexit` hook terminates every managed child gracefully (SIGTERM, then SIGKILL
//!   after a grace period) and removes its temp dir when the test harness exits normally;
//! - `PR_SET_PDEATHSIG` makes the kernel signal the child if the test binary is killed.
//!   The signal fires when the *thread* that forked dies, and `#[tokio::test]` threads
//!   are short-lived, so all children are forked from one thread that lives as long as
//!   the process.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::{Mutex, Once, OnceLock, mpsc};
use std::time::{Duration, Instant};

use tempfile::TempDir;

struct Managed {
    id: u32,
    name: String,
    child: Child,
    grace: Duration,
    /// Dropped (removed) only after the child is gone.
    dir: Option<TempDir>,
}

static MANAGED: Mutex<Vec<Managed>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

type SpawnRequest = (Command, mpsc::SyncSender<io::Result<Child>>);
static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();

/// A handle on a managed child; the process itself is owned by the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ManagedPid(pub(crate) u32);

fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("opm-testenv-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let parent = std::process::id();
                    // SAFETY: the closure runs between fork and exec and only calls
                    // async-signal-safe libc functions.
                    unsafe {
                        cmd.pre_exec(move || {
                            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                                return Err(io::Error::last_os_error());
                            }
                            // The parent may have died before prctl took effect.
                            if libc::getppid() as u32 != parent {
                                libc::_exit(1);
                            }
                            Ok(())
                        });
                    }
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the opm-testenv spawner thread");
        tx
    })
}

/// Starts `cmd` as a managed child: terminated at process exit (after `grace` for a clean
/// shutdown), and `dir` removed after it.
pub(crate) fn spawn_managed(
    name: &str,
    cmd: Command,
    grace: Duration,
    dir: Option<TempDir>,
) -> io::Result<ManagedPid> {
    AT_EXIT.call_once(|| {
        // SAFETY: registering a plain `extern "C" fn()` with no captured state.
        unsafe {
            libc::atexit(terminate_all_at_exit);
        }
    });
    let (tx, rx) = mpsc::sync_channel(1);
    spawner()
        .send((cmd, tx))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    let child = rx
        .recv()
        .map_err(|_| io::Error::other("spawner thread is gone"))??;
    let id = child.id();
    tracing::debug!(name, pid = id, "started managed child");
    lock().push(Managed {
        id,
        name: name.to_owned(),
        child,
        grace,
        dir,
    });
    Ok(ManagedPid(id))
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Managed>> {
    MANAGED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `Some(status)` once the child has exited.
pub(crate) fn exit_status(pid: ManagedPid) -> Option<ExitStatus> {
    let mut all = lock();
    let m = all.iter_mut().find(|m| m.id == pid.0)?;
    m.child.try_wait().ok().flatten()
}

/// Stops one managed child now (same procedure as at exit).
pub(crate) fn terminate(pid: ManagedPid) {
    let taken = {
        let mut all = lock();
        all.iter()
            .position(|m| m.id == pid.0)
            .map(|i| all.swap_remove(i))
    };
    if let Some(m) = taken {
        stop(m);
    }
}

fn stop(mut m: Managed) {
    if matches!(m.child.try_wait(), Ok(None)) {
        // SAFETY: plain kill(2) on a pid we own and have not reaped.
        unsafe {
            libc::kill(m.id as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + m.grace;
        loop {
            match m.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    eprintln!(
                        "opm-testenv: {} (pid {}) ignored SIGTERM, killing",
                        m.name, m.id
                    );
                    let _ = m.child.kill();
                    let _ = m.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    drop(m.dir.take());
}

extern "C" fn terminate_all_at_exit() {
    let all = std::mem::take(&mut *lock());
    for m in all {
        stop(m);
    }
}

/// SIGKILLs one managed child and reaps it; its temp dir (if any) is kept, so a successor
/// can start on the same data. Returns once the process is gone.
pub(crate) fn kill_now(pid: ManagedPid) -> Option<TempDir> {
    let taken = {
        let mut all = lock();
        all.iter()
            .position(|m| m.id == pid.0)
            .map(|i| all.swap_remove(i))
    };
    let mut m = taken?;
    let _ = m.child.kill();
    let _ = m.child.wait();
    m.dir.take()
}
