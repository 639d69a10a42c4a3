//! The load's population: its sources and targets as facts, its devices'
//! archetypes, and the in-process registration and deposit the census and
//! the tests share with the load over HTTP.

use crate::config::{Facts, SourceFact, TargetFact};

/// The load's population as facts: `sources` sources `src-K` (host
/// `host-K.example`, binding `html`, a 3,600 s change timescale, a
/// politeness bucket of 10⁶ tokens refilled at 10⁶ a second, so
/// politeness never binds) and `targets` targets `load-K` spread over them
/// round-robin. `sources` of 0 is taken as 1.
pub fn population_facts(targets: usize, sources: usize) -> Facts {
    let sources = sources.max(1);
    Facts {
        sources: (0..sources)
            .map(|i| SourceFact {
                source: format!("src-{i}"),
                host: format!("host-{i}.example"),
                binding: "html".into(),
                requires: vec![],
                change_timescale_s: Some(3600.0),
                bucket: Some((1e6, 1e6)),
            })
            .collect(),
        targets: (0..targets).map(|i| target_fact(i, sources)).collect(),
        ..Facts::default()
    }
}

/// Targets per facts request when the load seeds its population
/// ([`population_facts_in_batches`]): about 300 KB of JSON, far under
/// routerd's default facts body limit of 8 MiB, a snapshot of the rows one
/// request added that stays small beside the box's 256 MiB, and a store
/// write short enough for a drill's 1 s statement timeout on a slow VM
/// (20,000 targets in one request passed it on some VMs of this kind
/// and not on others).
pub const FACTS_BATCH: usize = 5_000;

/// [`population_facts`] as consecutive requests of at most `per_batch`
/// targets each (0 is taken as 1): the first declares every source, and
/// each adds the next targets in order. Applied in order they add what
/// the one request would; a population too large for one request body
/// (1,000,000 targets are some 60 MB of JSON) is seeded this way.
pub fn population_facts_in_batches(
    targets: usize,
    sources: usize,
    per_batch: usize,
) -> impl Iterator<Item = Facts> {
    let per_batch = per_batch.max(1);
    let sources = sources.max(1);
    let batches = targets.div_ceil(per_batch).max(1);
    (0..batches).map(move |b| {
        let mut f = if b == 0 {
            population_facts(0, sources)
        } else {
            Facts::default()
        };
        let end = ((b + 1) * per_batch).min(targets);
        f.targets = (b * per_batch..end)
            .map(|i| target_fact(i, sources))
            .collect();
        f
    })
}

fn target_fact(i: usize, sources: usize) -> TargetFact {
    TargetFact {
        target: format!("load-{i}"),
        source: format!("src-{}", i % sources),
        listing: false,
    }
}

/// The archetypes the load's devices register as, device `i` as entry
/// `i % 4`.
pub const LOAD_ARCHETYPES: [&str; 4] =
    ["browser", "desktop", "container_render", "container_plain"];

/// The registration of load device `index` (`load-dev-K`, archetype
/// [`LOAD_ARCHETYPES`]`[K % 4]`) as JSON for `POST /v1/register`; with its
/// `secret`, the registration of a known device that resumes its identity
/// (after its liveness lapsed: `404 unknown_device`).
pub fn registration_body(index: usize, token: &str, secret: Option<&str>) -> serde_json::Value {
    let mut body = serde_json::json!({
        "device_id": format!("load-dev-{index}"),
        "archetype": LOAD_ARCHETYPES[index % 4],
        "adapter_version": "1",
        "registration_token": token,
    });
    if let Some(secret) = secret {
        body["device_secret"] = secret.into();
    }
    body
}

/// Whether an answer says the device is not live (`404
/// unknown_device`): its lease TTL lapsed since it last registered or
/// leased, and a device registers again then, with the secret it holds.
pub fn lapsed(status: u16, body: &serde_json::Value) -> bool {
    status == 404 && body["error"] == "unknown_device"
}

/// Registers `devices` devices `load-dev-K` in process at `now_s`, over
/// [`LOAD_ARCHETYPES`] in turn, as [`seed`] does over HTTP: their ids and
/// secrets. Errors: the router's refusal of a registration.
pub fn register_in_process(
    r: &mut crate::Router,
    devices: usize,
    now_s: f64,
) -> Result<Vec<(String, String)>, crate::api::ApiError> {
    let token = r.config().registration_token.clone();
    (0..devices)
        .map(|i| {
            let id = format!("load-dev-{i}");
            let resp = r.register(
                &crate::api::RegisterRequest {
                    device_id: id.clone(),
                    archetype: LOAD_ARCHETYPES[i % 4].into(),
                    capabilities: vec![],
                    adapter_version: "1".into(),
                    registration_token: token.clone(),
                    device_secret: None,
                },
                now_s,
            )?;
            Ok((id, resp.device_secret))
        })
        .collect()
}

/// A successful deposit of `item` of lease `lease_id` by `device`: content
/// hash `hash`, 500 ms, adapter `html` version `1` (as the load generator
/// deposits over HTTP).
pub fn success_deposit(
    device: &str,
    secret: &str,
    lease_id: &str,
    item: &crate::api::LeaseItem,
    hash: &str,
) -> crate::api::DepositRequest {
    crate::api::DepositRequest {
        device_id: device.to_string(),
        device_secret: secret.to_string(),
        lease_id: lease_id.to_string(),
        target: item.target.clone(),
        deposit_token: item.deposit_token.clone(),
        receipt_revision: 0,
        adapter_id: "html".into(),
        adapter_version: "1".into(),
        outcome: crate::api::Outcome {
            ok: true,
            content_hash: Some(hash.to_string()),
            latency_ms: Some(500.0),
            error_class: None,
            retry_after_s: None,
            crawl_delay_s: None,
        },
        discovered: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batches_add_what_the_one_request_does() {
        for (targets, sources, per) in [(0, 3, 4), (1, 1, 4), (10, 3, 4), (12, 5, 4), (7, 0, 0)] {
            let whole = population_facts(targets, sources);
            let batches: Vec<Facts> = population_facts_in_batches(targets, sources, per).collect();
            assert_eq!(
                batches[0].sources, whole.sources,
                "{targets} {sources} {per}"
            );
            assert!(batches[1..].iter().all(|b| b.sources.is_empty()));
            assert!(batches.iter().all(|b| b.targets.len() <= per.max(1)));
            let joined: Vec<TargetFact> = batches.into_iter().flat_map(|b| b.targets).collect();
            assert_eq!(joined, whole.targets, "{targets} {sources} {per}");
        }
    }
}
