//! `routerd facts get|set`: the operator's facts over HTTP.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use router::http::OPERATOR_HEADER;

#[derive(Subcommand, Debug)]
pub(crate) enum FactsOp {
    /// Print the current facts as JSON.
    Get,
    /// Apply the facts in a JSON file (all or nothing).
    Set {
        /// The facts file.
        file: PathBuf,
    },
}

pub(crate) fn facts(op: FactsOp, url: &str, key: Option<String>) -> Result<()> {
    let key = match key {
        Some(k) => k,
        None => std::fs::read_to_string("router-data/operator.key")
            .map(|t| t.trim().to_string())
            .context("no --operator-key given and router-data/operator.key unreadable")?,
    };
    let key = key.as_str();
    let endpoint = format!("{}/v1/facts", url.trim_end_matches('/'));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = match op {
        FactsOp::Get => agent.get(&endpoint).header(OPERATOR_HEADER, key).call(),
        FactsOp::Set { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let _: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", file.display()))?;
            agent
                .put(&endpoint)
                .header(OPERATOR_HEADER, key)
                .header("content-type", "application/json")
                .send(text)
        }
    }
    .with_context(|| format!("calling {endpoint}"))?;
    let status = resp.status();
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    println!("{body}");
    if !status.is_success() {
        bail!("routerd answered {status}");
    }
    Ok(())
}
