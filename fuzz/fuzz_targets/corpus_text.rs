//! The golden corpus's text format: any input parses or is refused with a
//! typed error, never a panic; what parses writes back out and parses again
//! to the same corpus.
#![no_main]

use fleet_workloads::Corpus;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(corpus) = Corpus::parse(text, "fuzz.txt") {
        let again = Corpus::parse(&corpus.to_text(), "fuzz-again.txt")
            .expect("a parsed corpus written back out parses again");
        assert_eq!(again.to_text(), corpus.to_text());
        let _ = corpus.stats();
    }
});
