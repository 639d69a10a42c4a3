//! A local negative fact blocks repetition for the curiosity window, then reopens for a trial.

use routing::field::{Field, Layer};
use routing::participant::{Participant, Verdict};

#[test]
fn curiosity_window_blocks_then_reopens() {
    let f = Field::new(
        vec![Layer::new("source")],
        1.0,
        &["browser"],
        &["reliability"],
    )
    .unwrap();
    let receipt = f.decide(&f.parse("s").unwrap(), 0.0, &["browser"]).unwrap();
    let mut p = Participant::new(600.0).unwrap();
    assert_eq!(p.fold("s", &receipt, 0.0).unwrap(), Verdict::Execute);
    p.unreachable("s", 100.0).unwrap();
    match p.fold("s", &receipt, 400.0).unwrap() {
        Verdict::Protest {
            receipt: echoed,
            reopens_in_s,
        } => {
            assert_eq!(format!("{echoed:?}"), format!("{receipt:?}"));
            assert_eq!(reopens_in_s, 300.0);
        }
        v => panic!("expected a protest, got {v:?}"),
    }
    assert_eq!(p.fold("s", &receipt, 700.0).unwrap(), Verdict::Trial);
    assert_eq!(p.fold("other", &receipt, 400.0).unwrap(), Verdict::Execute);
    p.reached("s");
    assert_eq!(p.fold("s", &receipt, 400.0).unwrap(), Verdict::Execute);
    assert!(Participant::new(f64::NAN).is_err());
    assert!(p.unreachable("s", f64::INFINITY).is_err());
}
