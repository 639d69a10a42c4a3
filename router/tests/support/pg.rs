//! A throwaway PostgreSQL server for tests.
//!
//! [`shared`] gives a test its server, started on first use:
//!
//! * `ROUTER_TEST_PG=postgres://…` set: that server is used as is.
//! * otherwise a cluster is created with `initdb` in a temp dir and started
//!   with `pg_ctl` on a free loopback port (unix sockets in the temp dir),
//!   from `$ROUTER_TEST_PG_BIN` if set, else the newest
//!   `/usr/lib/postgresql/*/bin`, else `initdb` on `PATH`.
//!   As root (initdb refuses root) the server runs as the `postgres` user.
//!   Under nextest (`NEXTEST_RUN_ID` set; every test is its own process)
//!   all test processes of one run share one cluster, in
//!   `$TMPDIR/router-pg-run-<run id>-<t|d>/`; set `ROUTER_TEST_PG_SHARE=0`
//!   for one cluster per process. Under `cargo test` the test binary's
//!   threads share one (a `OnceLock`).
//! * neither: [`shared`] prints why and returns `None`; callers skip.
//!
//! Cleanup does not rely on destructors (a `static` is never dropped, a
//! killed test never unwinds). A cluster of one process is started and
//! stopped by a small supervisor shell in its own session that waits for
//! EOF on a pipe the test process holds open: however the process ends —
//! return, panic, SIGKILL, a nextest timeout killing the process group —
//! the pipe closes and the supervisor stops the server (`pg_ctl -m
//! immediate`) and removes the temp dir. A run-shared cluster counts its
//! users with a shared `flock` held by a helper that lives exactly as long
//! as the pipe; its supervisor stops the server and removes the dir once no
//! process has held that lock for 5 s. Joining and stopping serialize on
//! an exclusive lock, so a late test never meets a half-stopped cluster.
//!
//! Tests isolate themselves by schema: [`PgServer::schema`] hands out a
//! unique schema name and drops the schema when the guard goes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Options for a local cluster.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterOptions {
    /// `false` (tests): fsync off, synchronous_commit off, a crash may lose
    /// data but the tests never crash the server. `true` (benchmarks):
    /// PostgreSQL's durable defaults.
    pub durable: bool,
}

/// A running local cluster; stopped and deleted on `Drop` (and when the
/// process ends, whatever the way).
pub struct PgCluster {
    url: String,
    dir: PathBuf,
    port: u16,
    supervisor: Child,
    keepalive: Option<ChildStdin>,
}

/// The server a test talks to: an external one or a local cluster.
pub enum PgServer {
    /// `ROUTER_TEST_PG`.
    External(String),
    /// A cluster this process started.
    Local(PgCluster),
}

/// The newest PostgreSQL server binary directory, if any; or the one
/// `ROUTER_TEST_PG_BIN` names (only that one, e.g. to pick a version).
pub fn find_bin_dir() -> Option<PathBuf> {
    let complete = |d: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    if let Some(dir) = std::env::var_os("ROUTER_TEST_PG_BIN") {
        let dir = PathBuf::from(dir);
        return complete(&dir).then_some(dir);
    }
    let mut best: Option<(u32, PathBuf)> = None;
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        for e in rd.flatten() {
            let bin = e.path().join("bin");
            let v: u32 = e.file_name().to_string_lossy().parse().unwrap_or(0);
            if complete(&bin) && best.as_ref().is_none_or(|(bv, _)| v > *bv) {
                best = Some((v, bin));
            }
        }
    }
    if let Some((_, bin)) = best {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|d| complete(d))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn id_of(flag: &str, user: &str) -> Result<u32, String> {
    let o = Command::new("id")
        .args([flag, user])
        .output()
        .map_err(|e| format!("id {flag} {user}: {e}"))?;
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .map_err(|_| format!("no user {user:?} to run the PostgreSQL server as"))
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn pg_opts(opts: ClusterOptions) -> &'static str {
    if opts.durable {
        "-c max_connections=200"
    } else {
        "-c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    }
}

const SUPERVISOR: &str = include_str!("pg/supervisor.sh");

/// Joins (starting it if needed) the cluster shared by one nextest run.
/// Prints `ready <port>` once this process is counted as a user, then
/// holds the user lock until its stdin reaches EOF; or prints `error: …`.
const ATTACH: &str = include_str!("pg/attach.sh");

/// Stops a run-shared cluster once it has had no user for `$IDLE` seconds.
const RUN_SUPERVISOR: &str = include_str!("pg/run_supervisor.sh");

/// Makes a throwaway CA and a server certificate for `localhost` and
/// prints the options that turn the server's TLS on (needs openssl).
const TLS_CERT: &str = include_str!("pg/tls_cert.sh");

impl PgCluster {
    /// Joins the cluster shared by the nextest run `run_id` (see the module
    /// docs), starting it if this is the first user. The cluster outlives
    /// this handle while other processes use it.
    pub fn attach_run(bin: &Path, run_id: &str, opts: ClusterOptions) -> Result<PgCluster, String> {
        let tag: String = run_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(64)
            .collect();
        let base = std::env::temp_dir().join(format!(
            "router-pg-run-{tag}-{}",
            if opts.durable { "d" } else { "t" }
        ));
        let root = is_root();
        let (runas, chown) = if root {
            id_of("-u", "postgres")?;
            ("runuser -u postgres --", "postgres:postgres")
        } else {
            ("", "")
        };
        let mut last = String::new();
        for _ in 0..3 {
            let t0 = Instant::now();
            let mut child = Command::new("sh")
                .args(["-c", ATTACH])
                .env("B", &base)
                .env("PGBIN", bin)
                .env("PORT", free_port()?.to_string())
                .env("PGOPTS", pg_opts(opts))
                .env("RUNAS", runas)
                .env("CHOWN", chown)
                .env("IDLE", "5")
                .env("RUN_SUPERVISOR", RUN_SUPERVISOR)
                .env("TLS_CERT", TLS_CERT)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("spawn sh: {e}"))?;
            let keepalive = child.stdin.take();
            let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout pipe")?);
            let mut line = String::new();
            let _ = stdout.read_line(&mut line);
            let port = line
                .trim()
                .strip_prefix("ready ")
                .and_then(|p| p.parse::<u16>().ok());
            if let Some(port) = port {
                eprintln!(
                    "test PostgreSQL cluster of this run on 127.0.0.1:{port} in {} (joined in {} ms)",
                    base.display(),
                    t0.elapsed().as_millis()
                );
                return Ok(PgCluster {
                    url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
                    dir: base,
                    port,
                    supervisor: child,
                    keepalive,
                });
            }
            let mut rest = String::new();
            let _ = stdout.read_to_string(&mut rest);
            drop(keepalive);
            let _ = child.wait();
            last = format!("{line}{rest}");
        }
        Err(format!(
            "joining the run's PostgreSQL cluster failed: {last}"
        ))
    }

    /// Creates and starts a cluster of this process with the binaries in
    /// `bin`.
    pub fn start(bin: &Path, opts: ClusterOptions) -> Result<PgCluster, String> {
        let mut last = String::new();
        for _ in 0..3 {
            match PgCluster::try_start(bin, opts) {
                Ok(c) => return Ok(c),
                Err(e) => last = e, // e.g. the port was taken meanwhile
            }
        }
        Err(last)
    }

    fn try_start(bin: &Path, opts: ClusterOptions) -> Result<PgCluster, String> {
        let t0 = Instant::now();
        let root = is_root();
        let dir = tempfile::Builder::new()
            .prefix("router-pg-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?
            .keep();
        let runas: &[&str] = if root {
            let uid = id_of("-u", "postgres")?;
            let gid = id_of("-g", "postgres")?;
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", dir.display()))?;
            &["runuser", "-u", "postgres", "--"]
        } else {
            &[]
        };
        let mut initdb = Command::new(runas.first().copied().unwrap_or("env"));
        initdb
            .args(runas.iter().skip(1))
            .arg(bin.join("initdb"))
            .arg("-D")
            .arg(dir.join("data"))
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ]);
        let out = initdb.output().map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let port = free_port()?;
        let pgopts = pg_opts(opts);
        let mut supervisor = Command::new("setsid")
            .args(["sh", "-c", SUPERVISOR])
            .env("DIR", &dir)
            .env("PGBIN", bin)
            .env("PORT", port.to_string())
            .env("PGOPTS", pgopts)
            .env("RUNAS", runas.join(" "))
            .env("OWNER", if root { "postgres" } else { "" })
            .env("TLS_CERT", TLS_CERT)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn the cluster supervisor: {e}"))?;
        let keepalive = supervisor.stdin.take();
        let mut stdout = BufReader::new(supervisor.stdout.take().ok_or("no stdout pipe")?);
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        if line.trim() != "ready" {
            let mut rest = String::new();
            let _ = stdout.read_to_string(&mut rest);
            drop(keepalive);
            let _ = supervisor.wait();
            return Err(format!("PostgreSQL did not start: {line}{rest}"));
        }
        eprintln!(
            "test PostgreSQL cluster on 127.0.0.1:{port} in {} ({} ms)",
            dir.display(),
            t0.elapsed().as_millis()
        );
        Ok(PgCluster {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            port,
            supervisor,
            keepalive,
        })
    }

    /// The `postgres://` URL of the cluster's `postgres` database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The cluster's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temp dir holding the data directory and the server log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA of the server's certificate (for `localhost`), where the
    /// cluster was started with TLS (openssl was there).
    pub fn ca_file(&self) -> Option<PathBuf> {
        [self.dir.join("ca.crt"), self.dir.join("cluster/ca.crt")]
            .into_iter()
            .find(|p| p.is_file())
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if let Some(mut k) = self.keepalive.take() {
            let _ = k.flush();
        } // closing the pipe tells the supervisor to stop and clean up
        let _ = self.supervisor.wait();
    }
}

impl PgServer {
    /// The server's URL.
    pub fn url(&self) -> &str {
        match self {
            PgServer::External(u) => u,
            PgServer::Local(c) => c.url(),
        }
    }

    /// A `verify-full` URL (host `localhost`, dialled at 127.0.0.1) and
    /// the CA, where the server has TLS on: a local cluster started with
    /// a certificate, or `ROUTER_TEST_PG` set to such a URL with
    /// `ROUTER_TEST_PG_CA` naming the CA.
    pub fn tls(&self) -> Option<(String, PathBuf)> {
        match self {
            PgServer::External(u) => std::env::var_os("ROUTER_TEST_PG_CA")
                .filter(|_| u.contains("sslmode=verify-full"))
                .map(|ca| (u.clone(), PathBuf::from(ca))),
            PgServer::Local(c) => c.ca_file().map(|ca| {
                let url = format!(
                    "postgres://postgres@localhost:{}/postgres?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
                    c.port(),
                    ca.display()
                );
                (url, ca)
            }),
        }
    }

    /// A fresh, unique schema name (not created) that is dropped, with
    /// everything in it, when the guard goes.
    pub fn schema(&self, prefix: &str) -> SchemaGuard<'_> {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "{prefix}_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        SchemaGuard { server: self, name }
    }

    /// Runs `sql` (one or more statements) on a fresh connection.
    pub fn exec(&self, sql: &str) -> Result<(), String> {
        self.with_client(|c| {
            let sql = sql.to_string();
            Box::pin(async move { c.batch_execute(&sql).await })
        })
        .map(|_| ())
    }

    /// Runs one query on a fresh connection; each row's columns must be
    /// text (cast in SQL), NULL reads as `""`.
    pub fn query_text(&self, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let rows = self.with_client(|c| {
            let sql = sql.to_string();
            Box::pin(async move { c.query(&sql, &[]).await })
        })?;
        Ok(rows
            .iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.get::<_, Option<String>>(i).unwrap_or_default())
                    .collect()
            })
            .collect())
    }

    fn with_client<T: Send>(
        &self,
        f: impl for<'a> FnOnce(
                &'a tokio_postgres::Client,
            ) -> std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<T, tokio_postgres::Error>> + 'a>,
            > + Send,
    ) -> Result<T, String> {
        let url = admin_url(self.url());
        // A thread of its own, so this works from inside a runtime too.
        std::thread::scope(|s| {
            s.spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                rt.block_on(async move {
                    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                        .await
                        .map_err(|e| format!("connect {url}: {e}"))?;
                    let h = tokio::spawn(conn);
                    let r = f(&client).await.map_err(|e| match e.as_db_error() {
                        Some(db) => db.message().to_string(),
                        None => e.to_string(),
                    });
                    drop(client);
                    let _ = h.await;
                    r
                })
            })
            .join()
            .unwrap_or_else(|_| Err("query thread panicked".into()))
        })
    }
}

/// `url` for the tests' own connections (`tokio-postgres` without TLS):
/// libpq's `sslmode` and `sslrootcert` keys, which it cannot parse beyond
/// `disable`, `prefer` and `require`, become `sslmode=disable`.
pub fn admin_url(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let mut kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.starts_with("sslmode=") && !p.starts_with("sslrootcert="))
        .collect();
    kept.push("sslmode=disable");
    format!("{base}?{}", kept.join("&"))
}

/// A schema name owned by one test; `DROP SCHEMA … CASCADE` on drop.
pub struct SchemaGuard<'s> {
    server: &'s PgServer,
    name: String,
}

impl SchemaGuard<'_> {
    /// The schema name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server it lives on.
    pub fn server(&self) -> &PgServer {
        self.server
    }
}

impl Drop for SchemaGuard<'_> {
    fn drop(&mut self) {
        let _ = self
            .server
            .exec(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
    }
}

/// Starts (or finds) a server for this process: `ROUTER_TEST_PG`, else a
/// local cluster. `Ok(None)` when neither is possible (no server binary).
pub fn start_server(opts: ClusterOptions) -> Result<Option<PgServer>, String> {
    if let Ok(url) = std::env::var("ROUTER_TEST_PG") {
        if !url.is_empty() {
            return Ok(Some(PgServer::External(url)));
        }
    }
    let Some(bin) = find_bin_dir() else {
        return Ok(None);
    };
    PgCluster::start(&bin, opts).map(|c| Some(PgServer::Local(c)))
}

/// Like [`start_server`], but under nextest joins the cluster shared by
/// the whole run (unless `ROUTER_TEST_PG_SHARE=0`).
pub fn start_shared_server(opts: ClusterOptions) -> Result<Option<PgServer>, String> {
    let run = std::env::var("NEXTEST_RUN_ID")
        .ok()
        .filter(|r| !r.is_empty());
    let share = std::env::var("ROUTER_TEST_PG_SHARE").map_or(true, |v| v != "0");
    let external = std::env::var("ROUTER_TEST_PG").is_ok_and(|u| !u.is_empty());
    match (run, share, external) {
        (Some(run), true, false) => {
            let Some(bin) = find_bin_dir() else {
                return Ok(None);
            };
            PgCluster::attach_run(&bin, &run, opts).map(|c| Some(PgServer::Local(c)))
        }
        _ => start_server(opts),
    }
}

/// The server shared by this test process, started on first use. `None`,
/// after printing why, only when no PostgreSQL server binary exists and
/// `ROUTER_TEST_PG` is unset. Panics when binaries exist but the cluster
/// fails to start: that is a failure, not a skip.
pub fn shared() -> Option<&'static PgServer> {
    static SERVER: OnceLock<Result<Option<PgServer>, String>> = OnceLock::new();
    match SERVER.get_or_init(|| start_shared_server(ClusterOptions::default())) {
        Ok(Some(s)) => Some(s),
        Ok(None) => {
            eprintln!(
                "SKIPPED: no PostgreSQL server binary (initdb, pg_ctl, postgres in \
                 $ROUTER_TEST_PG_BIN, /usr/lib/postgresql/*/bin or on PATH) and \
                 ROUTER_TEST_PG unset; the PostgreSQL arm did not run"
            );
            None
        }
        Err(e) => panic!("test PostgreSQL server failed to start: {e}"),
    }
}
