//! routerd's HTTP shell in the test's own process, over real loopback
//! HTTP on a manual clock, so a test can hold its store (the writer and
//! the registrar then cannot write) and wait on events, never on time.

use super::routerd::{CLOCK_START_S, OPERATOR_KEY, TOKEN};

/// routerd in this process over real loopback HTTP, so the test can hold
/// its store (the writer then cannot append) without a timer.
pub struct InProcess {
    pub base: String,
    pub agent: ureq::Agent,
    pub store: router::core::SharedStore,
    pub shell: std::sync::Arc<router::http::Shell>,
    _rt: tokio::runtime::Runtime,
}

impl InProcess {
    pub fn start(deposit_queue: usize) -> InProcess {
        Self::start_on(deposit_queue, Box::new(router::store::MemoryStore::new()))
    }

    /// [`InProcess::start`] on `store`.
    pub fn start_on(deposit_queue: usize, store: Box<dyn router::store::Store>) -> InProcess {
        let cfg = router::config::RouterConfig {
            operator_key: OPERATOR_KEY.into(),
            registration_token: TOKEN.into(),
            deposit_queue,
            ..Default::default()
        };
        let manual = router::http::clock::ManualClock::new(CLOCK_START_S).unwrap();
        let core = router::core::Router::open(cfg, store, CLOCK_START_S).unwrap();
        let store = core.store_handle();
        let shell = router::http::Shell::new_manual(core, manual, None).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = router::http::app(shell.clone());
        rt.spawn(async move { axum::serve(listener, app).await });
        // The bound only stops a broken build from hanging the suite.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(20)))
            .build()
            .into();
        InProcess {
            base,
            agent,
            store,
            shell,
            _rt: rt,
        }
    }

    /// POSTs (PUT for the facts) `body`; (status, JSON body, Retry-After).
    pub fn send(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value, Option<String>) {
        let url = format!("{}{path}", self.base);
        let req = match path {
            "/v1/facts" => self.agent.put(&url),
            _ => self.agent.post(&url),
        };
        let mut resp = req
            .header("content-type", "application/json")
            .header("x-operator-key", OPERATOR_KEY)
            .send(body.to_string())
            .expect("the request reaches routerd");
        let retry = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let text = resp.body_mut().read_to_string().unwrap();
        (
            resp.status().as_u16(),
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
            retry,
        )
    }

    pub fn metric(&self, name: &str) -> f64 {
        let mut resp = self
            .agent
            .get(format!("{}/metrics", self.base))
            .call()
            .unwrap();
        let text = resp.body_mut().read_to_string().unwrap();
        let key = format!("router_{name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /metrics"))
    }
}
