//! Payloads of a mebibyte and more on every backend: bound as text, or,
//! past [`router::store::STREAMED_PAYLOAD`], streamed into their rows.

use router::store::{Row, StoreError, Table, Write};

use super::{dep, row, snapshot, Backend};

pub(super) fn large_payload(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    // 1 MiB of JSON text with multi-byte characters in it.
    let mut big = String::from("{\"blob\":\"");
    while big.len() < (1 << 20) - 16 {
        big.push_str("abcdefghij0123456789ßü€");
    }
    big.push_str("\"}");
    assert!(big.len() >= 1 << 20 || big.len() > (1 << 20) - 64);
    s.upsert(Table::Meta, &[row("field", 1, &big)]).unwrap();
    let batch: Vec<Row> = (0..3).map(|i| row(&format!("b{i}"), 1, &big)).collect();
    s.upsert(Table::Targets, &batch).unwrap();
    assert!(s.append_deposit(&dep(1, "big", &big)).unwrap());
    assert_eq!(s.get(Table::Meta, "field").unwrap().unwrap().payload, big);
    assert_eq!(s.load(Table::Targets).unwrap(), batch);
    assert_eq!(s.deposits_after(0).unwrap()[0].payload, big);
    if b.persistent() {
        drop(s);
        let mut s = b.open().unwrap();
        assert_eq!(s.get(Table::Meta, "field").unwrap().unwrap().payload, big);
    }
}

/// Payloads past [`router::store::STREAMED_PAYLOAD`] (SQLite writes them
/// in place instead of binding them): every read gives back the same
/// text, a smaller or larger payload replaces one, and a batch that fails
/// after one rolls it back.
pub(super) fn streamed_payload(b: &dyn Backend) {
    let big = |n: usize, fill: &str| {
        let mut p = String::from("{\"field\":\"");
        while p.len() < n {
            p.push_str(fill);
        }
        p + "\"}"
    };
    let (three, five) = (big(3 << 20, "xyz0123ßü€"), big(5 << 20, "€uvw"));
    assert!(three.len() > router::store::STREAMED_PAYLOAD);
    let mut s = b.open().unwrap();
    s.upsert(Table::Meta, &[row("snapshot", 1, &three)])
        .unwrap();
    assert_eq!(
        s.get(Table::Meta, "snapshot").unwrap(),
        Some(row("snapshot", 1, &three))
    );
    s.write_all(&[
        Write::Upsert(Table::Meta, &[row("snapshot", 2, &five)]),
        Write::Upsert(Table::Targets, &[row("t", 1, "small"), row("u", 1, &three)]),
    ])
    .unwrap();
    assert_eq!(
        s.get(Table::Meta, "snapshot").unwrap(),
        Some(row("snapshot", 2, &five))
    );
    assert_eq!(
        s.load(Table::Targets).unwrap(),
        vec![row("t", 1, "small"), row("u", 1, &three)]
    );
    assert_eq!(
        s.load_page(Table::Targets, Some("t"), 10).unwrap(),
        vec![row("u", 1, &three)]
    );
    // Back to a small payload, then to a large one again.
    s.upsert(Table::Targets, &[row("u", 2, "{}")]).unwrap();
    assert_eq!(s.get(Table::Targets, "u").unwrap(), Some(row("u", 2, "{}")));
    s.upsert(Table::Targets, &[row("u", 3, &five)]).unwrap();
    assert_eq!(
        s.get(Table::Targets, "u").unwrap(),
        Some(row("u", 3, &five))
    );
    if b.poison() {
        let before = snapshot(&mut *s);
        let err = s
            .write_all(&[
                Write::Upsert(Table::Meta, &[row("snapshot", 3, &three)]),
                Write::Upsert(Table::Targets, &[row("poison", 1, "x")]),
            ])
            .unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
        assert_eq!(snapshot(&mut *s), before, "the streamed row rolled back");
    }
    if b.persistent() {
        drop(s);
        let mut s = b.open().unwrap();
        assert_eq!(
            s.get(Table::Meta, "snapshot").unwrap(),
            Some(row("snapshot", 2, &five))
        );
    }
}
