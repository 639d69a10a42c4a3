//! The posture operator channel's JSON: any body is a patch, a wire refusal
//! (400) or a validation refusal (422) with a JSON error reply, never a
//! panic; a refused patch changes nothing.
#![no_main]

use fleet::posture::{PostureOwner, PosturePolicy};
use fleet_bench::ops::operator::{answer, parse_patch, ErrorReply, PostureView, POSTURE_PATH};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_patch(data);
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    let before = owner.policy();
    let (status, body) = answer(&owner, "POST", POSTURE_PATH, data);
    match status {
        200 => {
            let view: PostureView = serde_json::from_str(&body).expect("a view");
            assert!(view.policy.validate().is_ok());
        }
        400 | 422 => {
            let _: ErrorReply = serde_json::from_str(&body).expect("an error reply");
            assert_eq!(owner.policy(), before, "a refused patch changes nothing");
        }
        other => panic!("unexpected status {other}"),
    }
});
