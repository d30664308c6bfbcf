//! Memory limits of a `cue` run (SPEC §24 `--render-memory-limit`): `GOMEMLIMIT` asks the
//! Go collector to stay under the limit, and `RLIMIT_AS` makes a run that still grows fail
//! with `fatal error: out of memory` instead of taking the operator's cgroup down with it.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// The `RLIMIT_AS` of a run whose memory limit is `limit` (see [`ADDRESS_SPACE_HEADROOM`]).
pub fn address_space_for(limit: u64) -> u64 {
    limit.saturating_add(ADDRESS_SPACE_HEADROOM)
}

/// Sets `GOMEMLIMIT` and the address-space rlimit of the child about to be spawned.
pub fn limit_memory(cmd: &mut tokio::process::Command, limit: u64) {
    cmd.env("GOMEMLIMIT", limit.to_string());
    let bytes = address_space_for(limit);
    let rlimit = rustix::process::Rlimit {
        current: Some(bytes),
        maximum: Some(bytes),
    };
    // SAFETY: the closure runs between fork and exec; it only calls setrlimit(2), which is
    // async-signal-safe, allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setrlimit(rustix::process::Resource::As, rlimit)
                .map_err(std::io::Error::from)
        });
    }
}

/// What Go's runtime prints when an allocation or a reservation fails under the limit.
const OUT_OF_MEMORY: [&str; 5] = [
    "fatal error: out of memory",
    "runtime: out of memory",
    "failed to reserve page summary memory",
    "cannot allocate memory",
    "pthread_create failed: Resource temporarily unavailable",
];

/// Whether a failed run died of its memory limit: Go's out-of-memory messages, or a
/// SIGKILL the operator did not send (the kernel's OOM killer).
pub fn died_of_memory(status: &ExitStatus, stderr: &str) -> bool {
    status.signal() == Some(9) || OUT_OF_MEMORY.iter().any(|p| stderr.contains(p))
}

/// Address space a `cue` run may reserve beyond its memory limit. Go reserves address
/// space it never touches: with `cue` v0.17.1 a trivial export does not start under a
/// 768 MiB `RLIMIT_AS` (page-allocator summaries, thread stacks, glibc arenas), and under
/// limit + 1.5 GiB a memory bomb dies with `fatal error: out of memory` at about the
/// limit of resident memory (measured: 1.0-1.25 GiB with a 1 GiB limit). `GOMEMLIMIT`
/// set to the limit makes the collector work to stay below it first.
pub const ADDRESS_SPACE_HEADROOM: u64 = 1536 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_is_recognised_and_evaluation_errors_are_not() {
        let failed = ExitStatus::from_raw(2 << 8);
        assert!(died_of_memory(
            &failed,
            "runtime: out of memory: cannot allocate 4194304-byte block (1064992768 in use)\nfatal error: out of memory\n"
        ));
        assert!(died_of_memory(&ExitStatus::from_raw(9), ""));
        assert!(!died_of_memory(
            &ExitStatus::from_raw(1 << 8),
            "x: conflicting values 1 and 2"
        ));
        assert_eq!(address_space_for(u64::MAX), u64::MAX);
    }
}
