//! How a suite check reaches each backend: open, reopen, stamp a schema
//! version, fingerprint the raw state and poison an insert.

use super::*;

/// How a suite check reaches one backend.
pub(crate) trait Backend {
    /// Opens the store; every call reaches the same underlying data where
    /// the backend persists (a fresh store each time for memory).
    fn open(&self) -> Result<Box<dyn Store>, StoreError>;
    /// Whether data survives closing and reopening.
    fn persistent(&self) -> bool;
    /// Records migration `version` as applied, behind the store's back.
    /// `false` where the backend has no schema.
    fn stamp(&self, version: u32) -> bool;
    /// A digest of the raw stored state, for "nothing changed" checks.
    fn fingerprint(&self) -> String;
    /// Makes the backend fail an insert of key `poison` into `targets`
    /// (a trigger). `false` where the backend cannot.
    fn poison(&self) -> bool;
}

pub(crate) struct MemoryBackend;

impl Backend for MemoryBackend {
    fn open(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(Box::new(MemoryStore::new()))
    }
    fn persistent(&self) -> bool {
        false
    }
    fn stamp(&self, _: u32) -> bool {
        false
    }
    fn fingerprint(&self) -> String {
        String::new()
    }
    fn poison(&self) -> bool {
        false
    }
}

pub(crate) struct SqliteBackend {
    _tmp: tempfile::TempDir,
    pub(crate) dir: PathBuf,
}

impl SqliteBackend {
    pub(crate) fn new() -> SqliteBackend {
        let tmp = tempfile::tempdir().unwrap();
        // A directory that does not exist yet: open_dir creates it.
        let dir = tmp.path().join("router-data");
        SqliteBackend { _tmp: tmp, dir }
    }
    fn file(&self) -> PathBuf {
        self.dir.join("router.db")
    }
    pub(crate) fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.file()).unwrap()
    }
    /// A raw connection to the log file (deposits and leases).
    pub(crate) fn raw_log(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(router::store::log_path(&self.file())).unwrap()
    }
}

impl Backend for SqliteBackend {
    fn open(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(Box::new(SqliteStore::open_dir(&self.dir)?))
    }
    fn persistent(&self) -> bool {
        true
    }
    fn stamp(&self, version: u32) -> bool {
        self.raw()
            .execute(
                "INSERT INTO schema_migrations (version) VALUES (?1)",
                [version],
            )
            .unwrap();
        true
    }
    fn fingerprint(&self) -> String {
        // Both files: the main one and the log of deposits and leases.
        let mut h = Sha256::new();
        for f in [self.file(), router::store::log_path(&self.file())] {
            h.update(std::fs::read(f).unwrap());
        }
        format!("{:x}", h.finalize())
    }
    fn poison(&self) -> bool {
        self.raw()
            .execute_batch(
                "CREATE TRIGGER poison BEFORE INSERT ON targets WHEN NEW.key = 'poison'
                 BEGIN SELECT RAISE(ABORT, 'poisoned key'); END;",
            )
            .unwrap();
        true
    }
}

pub(crate) struct PgBackend {
    schema: support::pg::SchemaGuard<'static>,
}

impl PgBackend {
    /// `None` (the arm skips) only when no server binary exists.
    pub(crate) fn new() -> Option<PgBackend> {
        let server = support::pg::shared()?;
        Some(PgBackend {
            schema: server.schema("suite"),
        })
    }
    fn s(&self) -> &str {
        self.schema.name()
    }
}

impl Backend for PgBackend {
    fn open(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(Box::new(PgStore::connect_with_schema(
            self.schema.server().url(),
            self.s(),
        )?))
    }
    fn persistent(&self) -> bool {
        true
    }
    fn stamp(&self, version: u32) -> bool {
        let s = self.s();
        self.schema
            .server()
            .exec(&format!(
                "INSERT INTO \"{s}\".schema_migrations (version) VALUES ({version})"
            ))
            .unwrap();
        true
    }
    fn fingerprint(&self) -> String {
        let s = self.s();
        let mut out = String::new();
        let queries = [
            format!(
                "SELECT table_name::text FROM information_schema.tables
                 WHERE table_schema = '{s}' ORDER BY 1"
            ),
            format!("SELECT version::text FROM \"{s}\".schema_migrations ORDER BY 1"),
            format!("SELECT key || ':' || version || ':' || md5(payload) FROM \"{s}\".targets ORDER BY key"),
            format!("SELECT seq || ':' || token || ':' || md5(payload) FROM \"{s}\".deposits ORDER BY seq"),
        ];
        for q in queries {
            for row in self.schema.server().query_text(&q).unwrap() {
                out.push_str(&row.join(","));
                out.push('\n');
            }
            out.push_str("--\n");
        }
        out
    }
    fn poison(&self) -> bool {
        let s = self.s();
        self.schema
            .server()
            .exec(&format!(
                "CREATE FUNCTION \"{s}\".poison() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                   IF NEW.key = 'poison' THEN RAISE EXCEPTION 'poisoned key'; END IF;
                   RETURN NEW;
                 END $$;
                 CREATE TRIGGER poison BEFORE INSERT ON \"{s}\".targets
                 FOR EACH ROW EXECUTE FUNCTION \"{s}\".poison();"
            ))
            .unwrap();
        true
    }
}
