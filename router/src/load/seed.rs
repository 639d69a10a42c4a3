//! The load's setup: its facts declared and its devices registered, as a
//! fleet's devices register (each on its own, many at once), and a lapsed
//! device's registration again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
        again_while_unavailable(FACTS_TRIES, FACTS_PAUSE, || {
            let mut resp = a
                .put(format!("{}/v1/facts", spec.base))
                .header("content-type", "application/json")
                .header("x-operator-key", &spec.operator_key)
                .send(&facts)
                .map_err(|e| e.to_string())?;
            let body = resp.body_mut().read_to_string().unwrap_or_default();
            Ok((resp.status().as_u16(), body))
        })
        .map_err(|e| format!("facts refused: {e}"))?;
    }
    let t0 = Instant::now();
    let devices = register_all(spec)?;
    Ok((devices, t0.elapsed().as_secs_f64()))
}

/// How many times the setup sends a batch of facts in all, where routerd
/// answers 503 (its store unavailable for now: a typed, retryable answer,
/// docs/router.md "Bad input"), and the first pause between two sends
/// (doubled each time, at most 2 s: about 11.5 s in all).
const FACTS_TRIES: u32 = 8;
const FACTS_PAUSE: Duration = Duration::from_millis(250);

/// Runs `send` (an answer's status and body) until it answers other than
/// 503, at most `tries` times, pausing `pause` before the second send and
/// twice as long before each next one (at most 2 s). Errors: the body of
/// an answer other than 200, the last 503's after `tries`, or `send`'s own
/// error (no answer), at once.
fn again_while_unavailable(
    tries: u32,
    pause: Duration,
    mut send: impl FnMut() -> Result<(u16, String), String>,
) -> Result<(), String> {
    let mut wait = pause;
    let mut last = String::new();
    for k in 0..tries.max(1) {
        if k > 0 {
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_secs(2));
        }
        match send()? {
            (200, _) => return Ok(()),
            (503, body) => last = body,
            (status, body) => return Err(format!("{status} {body}")),
        }
    }
    Err(format!("503 {tries} times, the last: {last}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A send answering `answers` in turn, counting its calls.
    fn scripted<'a>(
        answers: &'a [(u16, &'a str)],
    ) -> (
        impl FnMut() -> Result<(u16, String), String> + 'a,
        std::rc::Rc<std::cell::Cell<usize>>,
    ) {
        let calls = std::rc::Rc::new(std::cell::Cell::new(0));
        let seen = calls.clone();
        let send = move || {
            let k = seen.get();
            seen.set(k + 1);
            let (s, b) = answers[k];
            Ok((s, b.to_string()))
        };
        (send, calls)
    }

    #[test]
    fn a_503_is_sent_again_until_it_is_taken() {
        let (send, calls) = scripted(&[(503, "busy"), (503, "busy"), (200, "{}")]);
        assert_eq!(again_while_unavailable(8, Duration::ZERO, send), Ok(()));
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn another_refusal_ends_at_once() {
        let (send, calls) = scripted(&[(503, "busy"), (400, "bad facts"), (200, "{}")]);
        assert_eq!(
            again_while_unavailable(8, Duration::ZERO, send),
            Err("400 bad facts".to_string())
        );
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn the_tries_are_bounded() {
        let (send, calls) = scripted(&[(503, "a"), (503, "b"), (503, "c"), (200, "{}")]);
        assert_eq!(
            again_while_unavailable(3, Duration::ZERO, send),
            Err("503 3 times, the last: c".to_string())
        );
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn no_answer_ends_at_once() {
        let mut calls = 0;
        let r = again_while_unavailable(8, Duration::ZERO, || {
            calls += 1;
            Err("connection refused".to_string())
        });
        assert_eq!(r, Err("connection refused".to_string()));
        assert_eq!(calls, 1);
    }
}
