//! Support for tests of the core in process (no HTTP).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use router::config::{Facts, SourceFact, TargetFact};
use router::store::{DepositEntry, MemoryStore, Row, Store, StoreError, Table};

/// Facts: one source `board` on `jobs.example` (a politeness bucket of
/// `bucket` tokens refilling `bucket` a second) with targets `ad-0` …
/// `ad-{n-1}`.
pub fn board_facts(n: usize, bucket: f64) -> Facts {
    Facts {
        sources: vec![SourceFact {
            source: "board".into(),
            host: "jobs.example".into(),
            binding: "html-v1".into(),
            requires: vec![],
            change_timescale_s: Some(86_400.0),
            bucket: Some((bucket, bucket)),
        }],
        targets: (0..n)
            .map(|i| TargetFact {
                target: format!("ad-{i}"),
                source: "board".into(),
                listing: false,
            })
            .collect(),
        ..Facts::default()
    }
}

/// A memory store that outlives one router (a restart opens the same data).
#[derive(Clone, Default)]
pub struct SharedMemory(Arc<Mutex<MemoryStore>>);

impl Store for SharedMemory {
    fn backend(&self) -> &'static str {
        "memory"
    }
    fn schema_version(&mut self) -> Result<u32, StoreError> {
        self.0.lock().unwrap().schema_version()
    }
    fn upsert(&mut self, t: Table, rows: &[Row]) -> Result<(), StoreError> {
        self.0.lock().unwrap().upsert(t, rows)
    }
    fn get(&mut self, t: Table, k: &str) -> Result<Option<Row>, StoreError> {
        self.0.lock().unwrap().get(t, k)
    }
    fn load(&mut self, t: Table) -> Result<Vec<Row>, StoreError> {
        self.0.lock().unwrap().load(t)
    }
    fn append_deposit(&mut self, e: &DepositEntry) -> Result<bool, StoreError> {
        self.0.lock().unwrap().append_deposit(e)
    }
    fn deposits_after(&mut self, s: u64) -> Result<Vec<DepositEntry>, StoreError> {
        self.0.lock().unwrap().deposits_after(s)
    }
    fn has_deposit(&mut self, t: &str) -> Result<bool, StoreError> {
        self.0.lock().unwrap().has_deposit(t)
    }
    fn last_seq(&mut self) -> Result<u64, StoreError> {
        self.0.lock().unwrap().last_seq()
    }
    fn prune_deposits(&mut self, up_to: u64) -> Result<u64, StoreError> {
        self.0.lock().unwrap().prune_deposits(up_to)
    }
    fn delete(&mut self, t: Table, keys: &[String]) -> Result<(), StoreError> {
        self.0.lock().unwrap().delete(t, keys)
    }
}

/// A memory store whose upserts into one table fail
/// (`Backend("disk full")`) while `fail` is set; everything else passes
/// through to `inner`.
#[derive(Clone)]
pub struct RefusingTable {
    pub inner: SharedMemory,
    pub table: Table,
    pub fail: Arc<AtomicBool>,
}

impl RefusingTable {
    /// A store refusing upserts into `table` once `fail` is set.
    pub fn new(table: Table) -> RefusingTable {
        RefusingTable {
            inner: SharedMemory::default(),
            table,
            fail: Arc::default(),
        }
    }
}

impl Store for RefusingTable {
    fn backend(&self) -> &'static str {
        "memory"
    }
    fn schema_version(&mut self) -> Result<u32, StoreError> {
        self.inner.schema_version()
    }
    fn upsert(&mut self, t: Table, rows: &[Row]) -> Result<(), StoreError> {
        if t == self.table && self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Backend("disk full".into()));
        }
        self.inner.upsert(t, rows)
    }
    fn get(&mut self, t: Table, k: &str) -> Result<Option<Row>, StoreError> {
        self.inner.get(t, k)
    }
    fn load(&mut self, t: Table) -> Result<Vec<Row>, StoreError> {
        self.inner.load(t)
    }
    fn append_deposit(&mut self, e: &DepositEntry) -> Result<bool, StoreError> {
        self.inner.append_deposit(e)
    }
    fn deposits_after(&mut self, s: u64) -> Result<Vec<DepositEntry>, StoreError> {
        self.inner.deposits_after(s)
    }
    fn has_deposit(&mut self, t: &str) -> Result<bool, StoreError> {
        self.inner.has_deposit(t)
    }
    fn last_seq(&mut self) -> Result<u64, StoreError> {
        self.inner.last_seq()
    }
    fn prune_deposits(&mut self, up_to: u64) -> Result<u64, StoreError> {
        self.inner.prune_deposits(up_to)
    }
    fn delete(&mut self, t: Table, keys: &[String]) -> Result<(), StoreError> {
        self.inner.delete(t, keys)
    }
}
