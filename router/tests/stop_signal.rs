//! A stop signal sent the moment routerd says it is listening stops it
//! gracefully. The listeners used to be installed only when the server's
//! shutdown future first ran, after the line: a SIGINT in between killed
//! routerd without its final snapshot, or, when SIGINT was ignored on
//! entry (a shell's background job passes that on), was lost and left
//! routerd running until its parent gave up.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::routerd::{wait_bounded, OPERATOR_KEY, TOKEN};

/// Starts routerd on `data`, SIGINT ignored on entry when `ignored`
/// (`trap '' INT` before `exec`: the disposition survives the exec), and
/// waits for its readiness line.
fn start(data: &std::path::Path, ignored: bool) -> Child {
    let trap = if ignored { "trap '' INT; " } else { "" };
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("{trap}exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_routerd"))
        .arg("--data")
        .arg(data)
        .args(["--listen", "127.0.0.1:0", "--operator-key", OPERATOR_KEY])
        .args(["--registration-token", TOKEN])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("routerd starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("a line");
    assert!(line.starts_with("routerd listening on "), "{line:?}");
    child
}

fn stops_cleanly_on_an_immediate_sigint(ignored: bool) {
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        let mut child = start(dir.path(), ignored);
        // At once, from this process: no `kill` process to start first.
        let pid = libc::pid_t::try_from(child.id()).expect("a pid");
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
        let status = wait_bounded(&mut child, Duration::from_secs(60));
        let status = status.unwrap_or_else(|| {
            panic!(
                "round {round}: routerd still ran 60 s after SIGINT (ignored on entry: {ignored})"
            )
        });
        // Exit 0 after a SIGINT only comes from the graceful path (drain,
        // final tick); the signal's default action ends it by the signal.
        assert!(
            status.success(),
            "round {round}: stopped by the signal, not gracefully: {status:?}"
        );
    }
}

#[test]
fn an_immediate_sigint_stops_routerd_gracefully() {
    stops_cleanly_on_an_immediate_sigint(false);
}

#[test]
fn an_immediate_sigint_stops_routerd_even_when_sigint_was_ignored_on_entry() {
    stops_cleanly_on_an_immediate_sigint(true);
}
