//! An in-memory [`Store`]: for tests and the in-process lab driver.

use std::collections::BTreeMap;

use super::{
    check_deposit, check_row, DepositEntry, Row, Store, StoreError, Table, SCHEMA_VERSION,
};

/// Keeps everything in ordered maps; lost when dropped.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    tables: BTreeMap<Table, BTreeMap<String, Row>>,
    deposits: BTreeMap<u64, DepositEntry>,
    tokens: BTreeMap<String, u64>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn schema_version(&mut self) -> Result<u32, StoreError> {
        Ok(SCHEMA_VERSION)
    }

    fn upsert(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError> {
        for r in rows {
            check_row(r)?;
        }
        let t = self.tables.entry(table).or_default();
        for r in rows {
            match t.get(&r.key) {
                Some(old) if old.version > r.version => {}
                _ => {
                    t.insert(r.key.clone(), r.clone());
                }
            }
        }
        Ok(())
    }

    fn get(&mut self, table: Table, key: &str) -> Result<Option<Row>, StoreError> {
        Ok(self.tables.get(&table).and_then(|t| t.get(key)).cloned())
    }

    fn load(&mut self, table: Table) -> Result<Vec<Row>, StoreError> {
        Ok(self
            .tables
            .get(&table)
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default())
    }

    fn append_deposit(&mut self, entry: &DepositEntry) -> Result<bool, StoreError> {
        check_deposit(entry)?;
        if self.tokens.contains_key(&entry.token) {
            return Ok(false);
        }
        if self.deposits.contains_key(&entry.seq) {
            return Err(StoreError::Backend(format!(
                "deposit seq {} is already logged with another token",
                entry.seq
            )));
        }
        self.tokens.insert(entry.token.clone(), entry.seq);
        self.deposits.insert(entry.seq, entry.clone());
        Ok(true)
    }

    fn deposits_after(&mut self, after: u64) -> Result<Vec<DepositEntry>, StoreError> {
        Ok(self
            .deposits
            .range(after.saturating_add(1)..)
            .map(|(_, e)| e.clone())
            .collect())
    }

    fn has_deposit(&mut self, token: &str) -> Result<bool, StoreError> {
        Ok(self.tokens.contains_key(token))
    }

    fn last_seq(&mut self) -> Result<u64, StoreError> {
        Ok(self.deposits.keys().next_back().copied().unwrap_or(0))
    }

    fn prune_deposits(&mut self, up_to: u64) -> Result<u64, StoreError> {
        let Some(&last) = self.deposits.keys().next_back() else {
            return Ok(0);
        };
        let cut = up_to.min(last.saturating_sub(1));
        let doomed: Vec<u64> = self.deposits.range(..=cut).map(|(k, _)| *k).collect();
        for seq in &doomed {
            if let Some(e) = self.deposits.remove(seq) {
                self.tokens.remove(&e.token);
            }
        }
        Ok(doomed.len() as u64)
    }

    fn delete(&mut self, table: Table, keys: &[String]) -> Result<(), StoreError> {
        if let Some(t) = self.tables.get_mut(&table) {
            for k in keys {
                t.remove(k);
            }
        }
        Ok(())
    }
}
