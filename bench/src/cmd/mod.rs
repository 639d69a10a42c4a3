//! One module per `fleet-lab` verb. Each exposes a clap `Args` struct and a
//! `run` function returning `anyhow::Result<()>`; the binary maps an error
//! to a plain message and a non-zero exit.

pub mod blocks;
pub mod bounds;
pub mod compare;
pub mod corpus;
pub mod gate;
pub mod parity;
pub mod plan;
pub mod posture;
pub mod report;
#[cfg(feature = "routing-lab")]
pub mod route;
pub mod run;
pub mod spin;

/// The one-line text of a verb's error: the message and each cause not
/// already said (a cause whose text an outer message quotes is left out,
/// so no sentence is printed twice).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
