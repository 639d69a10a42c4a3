//! One routerd per data directory: a second one on the same directory
//! (the same SQLite store, event log and operator key) is refused with a
//! clear error naming the first one's pid, and the directory is free again
//! once the first has stopped, however it stopped.

use std::process::Command;

use crate::support::routerd::{Routerd, OPERATOR_KEY, TOKEN};

/// Starts a second routerd on `data`; its exit status and output.
fn second(data: &std::path::Path) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_routerd"))
        .arg("--data")
        .arg(data)
        .args(["--listen", "127.0.0.1:0", "--operator-key", OPERATOR_KEY])
        .args(["--registration-token", TOKEN])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn a_second_routerd_on_the_same_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = Routerd::start(dir.path(), &[]);
    let pid = first.pid();
    let secret = first.register("d-1", "browser");
    let (ok, text) = second(dir.path());
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!(
            "another routerd (pid {pid}) serves the data directory"
        )),
        "{text}"
    );
    // Nothing of the first was touched: it still serves its device.
    let (status, _) = first.post(
        "/v1/lease",
        &crate::support::routerd::lease_body("d-1", &secret, None),
    );
    assert_eq!(status, 200);
    // SIGKILL: the kernel drops the lock with the process.
    first.kill();
    let after = Routerd::start(dir.path(), &[]);
    assert_ne!(after.pid(), pid);
    after.stop();
    // A graceful stop frees it too.
    Routerd::start(dir.path(), &[]).stop();
}
