//! The load's setup: its facts declared and its devices registered, as a
//! fleet's devices register (each on its own, many at once), and a lapsed
//! device's registration again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::Value;

use super::population_facts_in_batches;
use super::{agent, post, registration_body, LoadSpec, FACTS_BATCH};

/// Declares the load's sources and targets and registers its devices:
/// their ids and secrets, and the seconds the registrations took.
///
/// Errors: routerd refused the facts or a registration.
pub fn seed(spec: &LoadSpec) -> Result<(Vec<(String, String)>, f64), String> {
    let a = agent();
    for facts in population_facts_in_batches(spec.targets, spec.sources, FACTS_BATCH) {
        let facts = serde_json::to_string(&facts).map_err(|e| e.to_string())?;
        let mut resp = a
            .put(format!("{}/v1/facts", spec.base))
            .header("content-type", "application/json")
            .header("x-operator-key", &spec.operator_key)
            .send(facts)
            .map_err(|e| e.to_string())?;
        if resp.status().as_u16() != 200 {
            return Err(format!(
                "facts refused: {}",
                resp.body_mut().read_to_string().unwrap_or_default()
            ));
        }
    }
    let t0 = Instant::now();
    let devices = register_all(spec)?;
    Ok((devices, t0.elapsed().as_secs_f64()))
}

/// Registers the load's devices `0..spec.devices` from
/// [`LoadSpec::threads`] client threads at once (device `i` on thread
/// `i % threads`), as a fleet's devices register, each on its own: their
/// ids and secrets, in device order. Errors: routerd refused one (the
/// first refusal seen; the other threads stop at their next device).
fn register_all(spec: &LoadSpec) -> Result<Vec<(String, String)>, String> {
    let threads = spec.threads.clamp(1, spec.devices.max(1));
    let failed = AtomicBool::new(false);
    let url = format!("{}/v1/register", spec.base);
    let stripes: Vec<Result<Vec<(usize, String)>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let (url, failed) = (&url, &failed);
                scope.spawn(move || {
                    let a = agent();
                    let mut mine = Vec::new();
                    for i in (k..spec.devices).step_by(threads) {
                        if failed.load(Ordering::Relaxed) {
                            break;
                        }
                        let body = registration_body(i, &spec.registration_token, None);
                        let answer = post(&a, url, &body, None).and_then(|(s, v)| match s {
                            200 => Ok(v["device_secret"].as_str().unwrap_or("").to_string()),
                            _ => Err(format!("registration refused: {v}")),
                        });
                        match answer {
                            Ok(secret) => mine.push((i, secret)),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                    Ok(mine)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a registering thread failed".into()))
            })
            .collect()
    });
    let mut secrets = vec![String::new(); spec.devices];
    for stripe in stripes {
        for (i, secret) in stripe? {
            secrets[i] = secret;
        }
    }
    Ok(secrets
        .into_iter()
        .enumerate()
        .map(|(i, secret)| (format!("load-dev-{i}"), secret))
        .collect())
}

/// Registers load device `index` again at `base` with the `secret` it
/// holds and the registration `token`, as a device told `404
/// unknown_device` does ([`lapsed`]): it resumes its identity and its
/// trust. Returns (status, JSON body). Errors: no answer.
pub fn resume(
    agent: &ureq::Agent,
    base: &str,
    token: &str,
    index: usize,
    secret: &str,
) -> Result<(u16, Value), String> {
    let body = registration_body(index, token, Some(secret));
    post(agent, &format!("{base}/v1/register"), &body, None)
}
