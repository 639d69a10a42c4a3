//! The lab's store: what the in-process router needs to run and nothing it
//! would only need to restart. It keeps the latest rows (the snapshot and
//! the devices) and the set of deposit tokens, and drops deposit payloads,
//! so a week of simulated deposits costs 16 bytes each instead of a
//! logged JSON body. A restart is never simulated, so nothing is lost.

use std::collections::{BTreeMap, HashSet};

use router::store::{check_deposit, check_row, DepositEntry, Row, Store, StoreError, Table};

/// Latest rows per table, deposit tokens by digest, payloads dropped.
#[derive(Debug, Default)]
pub struct LabStore {
    rows: BTreeMap<Table, BTreeMap<String, Row>>,
    tokens: HashSet<(u64, u64)>,
    last_seq: u64,
}

impl LabStore {
    /// An empty store.
    pub fn new() -> LabStore {
        LabStore::default()
    }
}

fn digest(token: &str) -> (u64, u64) {
    let mut a = 0xcbf2_9ce4_8422_2325u64;
    let mut b = 0x8422_2325_cbf2_9ce4u64;
    for byte in token.bytes() {
        a = (a ^ byte as u64).wrapping_mul(0x100_0000_01b3);
        b = super::rng::mix64(b ^ byte as u64);
    }
    (a, b)
}

impl Store for LabStore {
    fn backend(&self) -> &'static str {
        "lab"
    }

    fn schema_version(&mut self) -> Result<u32, StoreError> {
        Ok(router::store::SCHEMA_VERSION)
    }

    fn upsert(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError> {
        for r in rows {
            check_row(r)?;
        }
        let t = self.rows.entry(table).or_default();
        for r in rows {
            if t.get(&r.key).is_none_or(|old| old.version <= r.version) {
                t.insert(r.key.clone(), r.clone());
            }
        }
        Ok(())
    }

    fn get(&mut self, table: Table, key: &str) -> Result<Option<Row>, StoreError> {
        Ok(self.rows.get(&table).and_then(|t| t.get(key)).cloned())
    }

    fn load(&mut self, table: Table) -> Result<Vec<Row>, StoreError> {
        Ok(self
            .rows
            .get(&table)
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default())
    }

    fn append_deposit(&mut self, entry: &DepositEntry) -> Result<bool, StoreError> {
        check_deposit(entry)?;
        if !self.tokens.insert(digest(&entry.token)) {
            return Ok(false);
        }
        self.last_seq = self.last_seq.max(entry.seq);
        Ok(true)
    }

    fn deposits_after(&mut self, _after: u64) -> Result<Vec<DepositEntry>, StoreError> {
        // Payloads are not kept: a lab router is never reopened on this store.
        Ok(Vec::new())
    }

    fn has_deposit(&mut self, token: &str) -> Result<bool, StoreError> {
        Ok(self.tokens.contains(&digest(token)))
    }

    fn last_seq(&mut self) -> Result<u64, StoreError> {
        Ok(self.last_seq)
    }

    fn prune_deposits(&mut self, _up_to: u64) -> Result<u64, StoreError> {
        // No payloads are kept (above): nothing to prune.
        Ok(0)
    }

    fn delete(&mut self, table: Table, keys: &[String]) -> Result<(), StoreError> {
        if let Some(t) = self.rows.get_mut(&table) {
            for k in keys {
                t.remove(k);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_logged_once_and_rows_keep_the_newest_version() {
        let mut s = LabStore::new();
        let e = DepositEntry {
            seq: 1,
            token: "tok".into(),
            payload: "{}".into(),
        };
        assert!(s.append_deposit(&e).unwrap());
        assert!(!s.append_deposit(&e).unwrap());
        assert!(s.has_deposit("tok").unwrap());
        assert_eq!(s.last_seq().unwrap(), 1);
        let row = |v: u64| Row {
            key: "k".into(),
            version: v,
            payload: v.to_string(),
        };
        s.upsert(Table::Meta, &[row(2)]).unwrap();
        s.upsert(Table::Meta, &[row(1)]).unwrap();
        assert_eq!(s.get(Table::Meta, "k").unwrap().unwrap().payload, "2");
    }
}
