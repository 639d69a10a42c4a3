//! The live devices' records, found by walking the live map and the
//! devices table side by side in their common key order, instead of one
//! lookup in the table per live device: both are ordered maps keyed by
//! the device id, so the walk is O(live + devices) sequential steps
//! where the lookups were O(live × log devices) string comparisons. At
//! 100,000 live devices the two walks each tick made with lookups (the
//! limited share and the live archetypes) were 12 % of routerd's CPU in
//! the small box (docs/router.md, "The small box").

use std::cmp::Ordering;

use super::state::{DeviceRec, Table};

/// The (id, record) of every key of `live` that `devices` holds, in key
/// order; live ids without a record are skipped.
pub(crate) fn live_records<'a, L: Clone>(
    live: &'a imbl::OrdMap<String, L>,
    devices: &'a Table<DeviceRec>,
) -> impl Iterator<Item = (&'a String, &'a DeviceRec)> + 'a {
    let mut records = devices.iter().peekable();
    live.keys().filter_map(move |id| {
        // Past every record below `id`; the next is `id`'s if it has one.
        while let Some((key, _)) = records.peek() {
            match key.as_str().cmp(id.as_str()) {
                Ordering::Less => {
                    records.next();
                }
                Ordering::Equal => return records.next().map(|(k, d)| (k, &**d as &DeviceRec)),
                Ordering::Greater => return None,
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn rec(trust: f64) -> DeviceRec {
        DeviceRec {
            archetype: "browser".into(),
            capabilities: Arc::from([]),
            adapter_version: "1".into(),
            trust,
            state: routing::trust::State::Normal,
            secret_digest: crate::ids::SecretDigest::of("s"),
            registered_at: 0.0,
            credential: "c".into(),
            network: None,
            last_seen_s: 0.0,
            deposits: 0,
            note: None,
        }
    }

    proptest! {
        /// The walk finds what a lookup per live id finds, in order.
        #[test]
        fn the_walk_is_a_lookup_per_live_id(
            live in proptest::collection::btree_set("[a-d]{1,3}", 0..40),
            devices in proptest::collection::btree_set("[a-d]{1,3}", 0..40),
        ) {
            let live: imbl::OrdMap<String, ()> = live.into_iter().map(|k| (k, ())).collect();
            let table: Table<DeviceRec> = devices
                .into_iter()
                .enumerate()
                .map(|(i, k)| (k, Arc::new(rec(i as f64))))
                .collect();
            let walked: Vec<(String, f64)> = live_records(&live, &table)
                .map(|(k, d)| (k.clone(), d.trust))
                .collect();
            let looked: Vec<(String, f64)> = live
                .keys()
                .filter_map(|k| table.get(k).map(|d| (k.clone(), d.trust)))
                .collect();
            prop_assert_eq!(walked, looked);
        }
    }
}
