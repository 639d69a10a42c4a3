//! The model check: random operation sequences give every backend the
//! same observable state as the in-memory store.

use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Upsert(Table, Vec<(usize, u64, usize)>),
    Append(u64, usize, usize),
    AppendBatch(Vec<(u64, usize, usize)>),
    Get(Table, usize),
    Has(usize),
    After(u64),
    /// An atomic batch: per write, upsert (true) or delete, its table and
    /// its rows (a delete takes their keys).
    WriteAll(Vec<(bool, Table, Vec<(usize, u64, usize)>)>),
    /// A page of a table: after a key (none: from the first), a limit.
    Page(Table, Option<usize>, usize),
}

/// Small pools so that keys, tokens and seqs collide often; index 0 of
/// the key pool is the empty (bad) key.
const KEYS: [&str; 6] = ["", "a", "b", "é", "日", "a b"];
const PAYLOADS: [&str; 3] = ["{}", "[1,2]", "{\"x\":\"ü\"}"];

fn table() -> impl Strategy<Value = Table> {
    prop_oneof![
        Just(Table::Devices),
        Just(Table::Targets),
        Just(Table::Meta)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (table(), prop::collection::vec((0..KEYS.len(), 0..5u64, 0..PAYLOADS.len()), 0..5))
            .prop_map(|(t, rows)| Op::Upsert(t, rows)),
        3 => (0..8u64, 0..KEYS.len(), 0..PAYLOADS.len()).prop_map(|(s, k, p)| Op::Append(s, k, p)),
        2 => prop::collection::vec((0..8u64, 0..KEYS.len(), 0..PAYLOADS.len()), 0..5)
            .prop_map(Op::AppendBatch),
        1 => (table(), 0..KEYS.len()).prop_map(|(t, k)| Op::Get(t, k)),
        1 => (0..KEYS.len()).prop_map(Op::Has),
        1 => (0..9u64).prop_map(Op::After),
        2 => prop::collection::vec(
            (any::<bool>(), table(), prop::collection::vec((0..KEYS.len(), 0..5u64, 0..PAYLOADS.len()), 0..4)),
            0..4,
        )
        .prop_map(Op::WriteAll),
        1 => (table(), prop::option::of(0..KEYS.len()), 0..4usize).prop_map(|(t, a, n)| Op::Page(t, a, n)),
    ]
}

/// A result reduced to what must agree across backends.
fn outcome<T: std::fmt::Debug>(r: Result<T, StoreError>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(StoreError::BadKey(_)) => "bad key".into(),
        Err(StoreError::BadValue(_)) => "bad value".into(),
        Err(StoreError::Backend(_)) => "backend error".into(),
        Err(StoreError::Timeout(_)) => "timeout".into(),
        Err(StoreError::Fenced(_)) => "fenced".into(),
        Err(StoreError::SchemaTooNew { .. }) => "schema too new".into(),
    }
}

fn apply(s: &mut dyn Store, op: &Op) -> String {
    match op {
        Op::Upsert(t, rows) => {
            let rows: Vec<Row> = rows
                .iter()
                .map(|&(k, v, p)| row(KEYS[k], v, PAYLOADS[p]))
                .collect();
            outcome(s.upsert(*t, &rows))
        }
        Op::Append(seq, k, p) => outcome(s.append_deposit(&dep(*seq, KEYS[*k], PAYLOADS[*p]))),
        Op::AppendBatch(es) => {
            let es: Vec<DepositEntry> = es
                .iter()
                .map(|&(seq, k, p)| dep(seq, KEYS[k], PAYLOADS[p]))
                .collect();
            let rs: Vec<String> = s.append_deposits(&es).into_iter().map(outcome).collect();
            rs.join("; ")
        }
        Op::Get(t, k) => outcome(s.get(*t, KEYS[*k])),
        Op::Has(k) => outcome(s.has_deposit(KEYS[*k])),
        Op::After(a) => outcome(s.deposits_after(*a)),
        Op::WriteAll(ws) => {
            let rows: Vec<Vec<Row>> = ws
                .iter()
                .map(|(_, _, rs)| {
                    rs.iter()
                        .map(|&(k, v, p)| row(KEYS[k], v, PAYLOADS[p]))
                        .collect()
                })
                .collect();
            let keys: Vec<Vec<String>> = rows
                .iter()
                .map(|rs| rs.iter().map(|r| r.key.clone()).collect())
                .collect();
            let writes: Vec<Write<'_>> = ws
                .iter()
                .zip(rows.iter().zip(&keys))
                .map(|((upsert, t, _), (rs, ks))| {
                    if *upsert {
                        Write::Upsert(*t, rs)
                    } else {
                        Write::Delete(*t, ks)
                    }
                })
                .collect();
            outcome(s.write_all(&writes))
        }
        Op::Page(t, after, limit) => outcome(s.load_page(*t, after.map(|k| KEYS[k]), *limit)),
    }
}

fn check(b: &dyn Backend, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model = MemoryStore::new();
    let mut s = b.open().unwrap();
    for (i, op) in ops.iter().enumerate() {
        let want = apply(&mut model, op);
        let got = apply(&mut *s, op);
        prop_assert_eq!(&got, &want, "op {} {:?}", i, op);
        prop_assert_eq!(
            snapshot(&mut *s),
            snapshot(&mut model),
            "after op {} {:?}",
            i,
            op
        );
    }
    if b.persistent() {
        drop(s);
        let mut s = b.open().unwrap();
        prop_assert_eq!(snapshot(&mut *s), snapshot(&mut model), "after reopening");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn sqlite_agrees_with_memory(ops in prop::collection::vec(op(), 1..30)) {
        check(&SqliteBackend::new(), &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn postgres_agrees_with_memory(ops in prop::collection::vec(op(), 1..30)) {
        if let Some(b) = PgBackend::new() {
            check(&b, &ops)?;
        }
    }
}
