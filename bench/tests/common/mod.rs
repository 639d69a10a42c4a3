//! What the `fleet-lab` CLI tests share: running the binary, reading its
//! output, the shipped corpus.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `fleet-lab ARGS` in `cwd` with only errors logged.
pub fn lab(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(args)
        .current_dir(cwd)
        .env("RUST_LOG", "error")
        .output()
        .expect("fleet-lab runs")
}

/// Standard output then standard error, as text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The shipped golden corpus's path.
pub fn corpus() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus/golden-v1.txt")
        .display()
        .to_string()
}
