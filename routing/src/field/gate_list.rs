//! Serializes the gate map as a list of (address, option, gate) entries, so
//! formats with string-only map keys (JSON) can hold it.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Address;

type Gates = BTreeMap<Address, BTreeMap<String, bool>>;

pub fn serialize<S: Serializer>(gates: &Gates, s: S) -> Result<S::Ok, S::Error> {
    let list: Vec<(&Address, &String, bool)> = gates
        .iter()
        .flat_map(|(a, m)| m.iter().map(move |(o, g)| (a, o, *g)))
        .collect();
    list.serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Gates, D::Error> {
    let list: Vec<(Address, String, bool)> = Vec::deserialize(d)?;
    let mut gates = Gates::new();
    for (a, o, g) in list {
        gates.entry(a).or_default().insert(o, g);
    }
    Ok(gates)
}
