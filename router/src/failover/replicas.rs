//! The drill's replica processes: started on free loopback ports with a
//! data directory each and the drill's keys, the first through a
//! [`crate::netcut`] proxy for a cut; their statuses awaited; killed with
//! the drill.

use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::ledger::{Device, GIVE_UP};
use super::FailoverSpec;
use crate::load::{agent, post, spawn_routerd};
use crate::store::{PgStore, Store};

/// The flags a drill's replicas run with besides name, store and keys:
/// the lead's TTL `lead_ttl_s`, 1 s bounds on a store call and a connect,
/// device budgets of 1,000 requests, a 200 ms tick.
pub fn drill_flags(lead_ttl_s: f64) -> Vec<String> {
    [
        "--lead-ttl-s",
        &lead_ttl_s.to_string(),
        "--store-timeout-s",
        "1",
        "--store-connect-timeout-s",
        "1",
        "--device-rate",
        "1000,1000",
        "--tick-ms",
        "200",
    ]
    .map(String::from)
    .to_vec()
}

/// The replicas of one drill (killed when dropped).
pub struct Replicas {
    spec: FailoverSpec,
    procs: Vec<Option<(Child, String)>>,
    cut: Option<Arc<AtomicBool>>,
    /// The operator key every replica holds.
    pub key: String,
    /// The registration token every replica holds.
    pub token: String,
}

impl Drop for Replicas {
    fn drop(&mut self) {
        for (c, _) in self.procs.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Replicas {
    /// Starts `spec.replicas` replicas with the drill's flags (lead TTL
    /// from `spec`, 1 s store bounds, a 200 ms tick, device budgets of
    /// 1,000 requests); with `cut`, the first dials the store through a
    /// proxy and leads before the others start.
    ///
    /// Errors: a replica did not start, or the first did not lead.
    pub fn start(spec: &FailoverSpec, cut: bool) -> Result<Replicas, String> {
        let flags = drill_flags(spec.lead_ttl_s);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        Self::start_with(spec, cut, &flags)
    }

    /// Starts `spec.replicas` replicas with `flags` besides the replica's
    /// name, store, schema and keys (`spec.lead_ttl_s` unused); see
    /// [`Replicas::start`].
    ///
    /// Errors: a replica did not start, or the first did not lead.
    pub fn start_with(spec: &FailoverSpec, cut: bool, flags: &[&str]) -> Result<Replicas, String> {
        let mut rs = Replicas {
            spec: spec.clone(),
            procs: Vec::new(),
            cut: None,
            key: crate::ids::token(),
            token: crate::ids::token(),
        };
        for i in 0..spec.replicas {
            let url = if cut && i == 0 {
                let bad = || "a cut needs a store URL with @host:port/".to_string();
                let (_, upstream) = crate::netcut::via_port(&spec.url, 0).ok_or_else(bad)?;
                let (port, flag) = crate::netcut::proxy(([127, 0, 0, 1], upstream).into())
                    .map_err(|e| format!("proxy: {e}"))?;
                rs.cut = Some(flag);
                crate::netcut::via_port(&spec.url, port).ok_or_else(bad)?.0
            } else {
                spec.url.clone()
            };
            let child = rs.spawn(i, &url, flags)?;
            rs.procs.push(Some(child));
            if cut && i == 0 {
                rs.agreed_lead(&[0])?;
            }
        }
        Ok(rs)
    }

    fn spawn(&self, i: usize, url: &str, flags: &[&str]) -> Result<(Child, String), String> {
        let name = format!("r{i}");
        let data = self.spec.data.join(&name);
        std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        let mut extra = vec![
            "--replica-id",
            name.as_str(),
            "--store",
            url,
            "--store-schema",
            self.spec.schema.as_str(),
        ];
        extra.extend_from_slice(flags);
        spawn_routerd(&self.spec.routerd, &data, &self.key, &self.token, &extra)
    }

    /// Replica `i`'s process id (0 once killed).
    pub fn pid(&self, i: usize) -> u32 {
        self.procs
            .get(i)
            .and_then(|p| p.as_ref())
            .map_or(0, |(c, _)| c.id())
    }

    /// The replicas still running.
    pub fn live(&self) -> Vec<usize> {
        (0..self.procs.len())
            .filter(|&i| self.procs[i].is_some())
            .collect()
    }

    /// Replica `i`'s base URL (also after it was killed).
    pub fn base(&self, i: usize) -> String {
        self.procs
            .get(i)
            .and_then(|p| p.as_ref())
            .map(|(_, b)| b.clone())
            .unwrap_or_default()
    }

    /// Kills replica `i` with SIGKILL.
    pub fn kill(&mut self, i: usize) {
        if let Some((mut c, _)) = self.procs.get_mut(i).and_then(Option::take) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Cuts (or heals) the first replica's link to the store.
    pub fn cut(&self, on: bool) {
        if let Some(c) = &self.cut {
            c.store(on, Ordering::SeqCst);
        }
    }

    fn status(&self, i: usize) -> Option<Value> {
        let mut resp = agent()
            .get(format!("{}/v1/replica", self.base(i)))
            .call()
            .ok()?;
        serde_json::from_str(&resp.body_mut().read_to_string().ok()?).ok()
    }

    /// Waits until the replicas `of` agree on one lead: one leads, the
    /// others follow it under the same term. Returns its index, term and name.
    ///
    /// Errors: no agreement within [`GIVE_UP`].
    pub fn agreed_lead(&self, of: &[usize]) -> Result<(usize, i64, String), String> {
        let start = Instant::now();
        loop {
            let st: Vec<Option<Value>> = of.iter().map(|&i| self.status(i)).collect();
            let leading: Vec<usize> = (0..of.len())
                .filter(|&k| st[k].as_ref().is_some_and(|v| v["role"] == "leading"))
                .collect();
            if let [k] = leading[..] {
                let v = st[k].clone().unwrap_or_default();
                let term = v["term"].as_i64().unwrap_or(-1);
                let agreed = st.iter().all(|s| {
                    s.as_ref().is_some_and(|s| {
                        s["term"].as_i64() == Some(term) && s["leader"] == v["replica"]
                    })
                });
                if agreed {
                    return Ok((of[k], term, v["replica"].as_str().unwrap_or("").into()));
                }
            }
            if start.elapsed() > GIVE_UP {
                return Err(format!(
                    "no agreed lead among {of:?} within {GIVE_UP:?}: {st:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until none of `of` leads.
    ///
    /// Errors: one still leads after [`GIVE_UP`].
    pub fn wait_not_leading(&self, of: &[usize]) -> Result<(), String> {
        let start = Instant::now();
        while of
            .iter()
            .any(|&i| self.status(i).is_some_and(|v| v["role"] == "leading"))
        {
            if start.elapsed() > GIVE_UP {
                return Err(format!("{of:?} still leading after {GIVE_UP:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// A lease request by `d` at replica `i`: (status, error kind);
    /// status 0 when no answer came.
    pub fn lease_probe(&self, i: usize, d: &Device) -> (u16, String) {
        let body = json!({"device_id": d.0, "device_secret": d.1, "max_items": 1});
        match post(&agent(), &format!("{}/v1/lease", self.base(i)), &body, None) {
            Ok((s, v)) => (s, v["error"].as_str().unwrap_or("").to_string()),
            Err(_) => (0, "transport".into()),
        }
    }

    /// PUTs `facts` at `base` with the operator key: (status, body).
    ///
    /// Errors: no answer.
    pub fn put_facts(&self, base: &str, facts: &Value) -> Result<(u16, Value), String> {
        let mut resp = agent()
            .put(format!("{base}/v1/facts"))
            .header("content-type", "application/json")
            .header("x-operator-key", &self.key)
            .send(facts.to_string())
            .map_err(|e| e.to_string())?;
        let s = resp.status().as_u16();
        Ok((
            s,
            serde_json::from_str(&resp.body_mut().read_to_string().unwrap_or_default())
                .unwrap_or(Value::Null),
        ))
    }

    /// The shared schema, opened directly (unfenced) for the checks.
    ///
    /// Errors: the store's.
    pub fn open_store(&self) -> Result<Box<dyn Store>, String> {
        PgStore::connect_with_schema(&self.spec.url, &self.spec.schema)
            .map(|s| Box::new(s) as Box<dyn Store>)
            .map_err(|e| e.to_string())
    }
}
