//! The deposit log's checks, run for every backend by the suite: append
//! and replay in order, batches, and retention (pruning what a snapshot
//! covers).

use super::*;

pub(super) fn deposit_log(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    assert_eq!(s.last_seq().unwrap(), 0);
    assert_eq!(s.deposits_after(0).unwrap(), vec![]);
    assert!(!s.has_deposit("t5").unwrap());
    // Appended out of order; read back ascending.
    assert!(s.append_deposit(&dep(5, "t5", "five")).unwrap());
    assert!(s.append_deposit(&dep(2, "t2", "two")).unwrap());
    assert!(s.append_deposit(&dep(9, "t9", "nine")).unwrap());
    assert_eq!(s.last_seq().unwrap(), 9);
    assert!(s.has_deposit("t5").unwrap());
    assert!(!s.has_deposit("t6").unwrap());
    let all = vec![
        dep(2, "t2", "two"),
        dep(5, "t5", "five"),
        dep(9, "t9", "nine"),
    ];
    assert_eq!(s.deposits_after(0).unwrap(), all);
    assert_eq!(s.deposits_after(2).unwrap(), all[1..].to_vec());
    assert_eq!(s.deposits_after(5).unwrap(), all[2..].to_vec());
    assert_eq!(s.deposits_after(9).unwrap(), vec![]);
    assert_eq!(s.deposits_after(u64::MAX).unwrap(), vec![]);
    // Same token again: false, stored entry unchanged (same or other seq).
    assert!(!s.append_deposit(&dep(5, "t5", "five")).unwrap());
    assert!(!s.append_deposit(&dep(5, "t5", "changed")).unwrap());
    assert!(!s.append_deposit(&dep(12, "t5", "moved")).unwrap());
    assert_eq!(s.deposits_after(0).unwrap(), all);
    assert_eq!(s.last_seq().unwrap(), 9);
    // A seq already logged under another token: refused, nothing changed.
    let err = s.append_deposit(&dep(5, "t-other", "x")).unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
    assert!(!s.has_deposit("t-other").unwrap());
    assert_eq!(s.deposits_after(0).unwrap(), all);
    // The largest seq the SQL backends can store.
    let max = u64::try_from(i64::MAX).unwrap();
    assert!(s.append_deposit(&dep(max, "t-max", "m")).unwrap());
    assert_eq!(s.last_seq().unwrap(), max);
    assert_eq!(s.deposits_after(9).unwrap(), vec![dep(max, "t-max", "m")]);
}

pub(super) fn deposit_batches(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    assert_eq!(s.append_deposits(&[]).len(), 0);
    assert!(s.append_deposit(&dep(1, "old", "o")).unwrap());
    // All new: one batch.
    let fresh: Vec<DepositEntry> = (2..=6).map(|i| dep(i, &format!("t{i}"), "{}")).collect();
    let r = s.append_deposits(&fresh);
    assert!(r.iter().all(|x| matches!(x, Ok(true))), "{r:?}");
    assert_eq!(s.last_seq().unwrap(), 6);
    // Mixed: new, logged before, repeated within the batch, bad token, seq
    // taken by another token, new. Results as one-by-one appends.
    let mixed = [
        dep(7, "t7", "a"),
        dep(1, "old", "changed"),
        dep(7, "t7", "again"),
        dep(8, "", "x"),
        dep(2, "t-other", "x"),
        dep(9, "t9", "b"),
    ];
    let r = s.append_deposits(&mixed);
    assert_eq!(r.len(), mixed.len());
    assert!(matches!(r[0], Ok(true)), "{r:?}");
    assert!(matches!(r[1], Ok(false)), "{r:?}");
    assert!(matches!(r[2], Ok(false)), "{r:?}");
    assert!(matches!(r[3], Err(StoreError::BadKey(_))), "{r:?}");
    assert!(matches!(r[4], Err(StoreError::Backend(_))), "{r:?}");
    assert!(matches!(r[5], Ok(true)), "{r:?}");
    let log = s.deposits_after(0).unwrap();
    let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6, 7, 9]);
    assert_eq!(log[0], dep(1, "old", "o"));
    assert_eq!(log[6], dep(7, "t7", "a"));
    assert!(!s.has_deposit("t-other").unwrap());
    // A whole batch replayed: all false, nothing changes.
    let before = snapshot(&mut *s);
    let r = s.append_deposits(&fresh);
    assert!(r.iter().all(|x| matches!(x, Ok(false))), "{r:?}");
    assert_eq!(snapshot(&mut *s), before);
    if b.persistent() {
        drop(s);
        let mut s = b.open().unwrap();
        assert_eq!(snapshot(&mut *s), before);
    }
}

/// Retention: pruning the deposit log keeps the highest entry (so a
/// restart never reuses a seq) and only what is past the given seq;
/// deleting rows removes exactly the named keys.
pub(super) fn retention(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    assert_eq!(s.prune_deposits(100).unwrap(), 0, "an empty log");
    for seq in 1..=10 {
        assert!(s
            .append_deposit(&dep(seq, &format!("t{seq}"), "p"))
            .unwrap());
    }
    assert_eq!(s.prune_deposits(7).unwrap(), 7);
    let left: Vec<u64> = s.deposits_after(0).unwrap().iter().map(|d| d.seq).collect();
    assert_eq!(left, vec![8, 9, 10]);
    assert!(!s.has_deposit("t7").unwrap());
    assert!(s.has_deposit("t8").unwrap());
    assert_eq!(s.prune_deposits(u64::MAX).unwrap(), 2, "the highest stays");
    assert_eq!(s.last_seq().unwrap(), 10);
    assert_eq!(s.deposits_after(0).unwrap(), vec![dep(10, "t10", "p")]);
    assert_eq!(s.prune_deposits(10).unwrap(), 0);
    s.upsert(
        Table::Devices,
        &[row("a", 1, "x"), row("b", 1, "y"), row("c", 1, "z")],
    )
    .unwrap();
    s.delete(
        Table::Devices,
        &["a".into(), "c".into(), "absent".into(), String::new()],
    )
    .unwrap();
    assert_eq!(s.load(Table::Devices).unwrap(), vec![row("b", 1, "y")]);
    if b.persistent() {
        drop(s);
        let mut s = b.open().unwrap();
        assert_eq!(s.last_seq().unwrap(), 10);
        assert_eq!(s.load(Table::Devices).unwrap(), vec![row("b", 1, "y")]);
    }
}
