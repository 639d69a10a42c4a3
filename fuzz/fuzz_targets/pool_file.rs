//! The pool file (`corpus derive`'s input): any input parses or is refused
//! with a typed error, never a panic; what parses writes back out and
//! parses again to the same text.
#![no_main]

use fleet_workloads::corpus::PoolFile;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(file) = PoolFile::parse(text, Path::new("fuzz.pools")) {
        let written = file.to_text();
        let again = PoolFile::parse(&written, Path::new("fuzz-again.pools"))
            .expect("a parsed pool file written back out parses again");
        assert_eq!(again.to_text(), written);
    }
});
