//! Bad input through the binary: refused plainly, naming what to change,
//! and nothing is written or replaced.

use super::*;

#[test]
fn bad_input_is_refused_plainly_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = lab(
        &["run", "--scale", "0", "--out", out.to_str().unwrap()],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("--scale 0 is invalid"), "{}", text(&o));
    let o = lab(&["run", "--profile", "bogus"], dir.path());
    assert!(!o.status.success());
    assert!(text(&o).contains("bogus"), "{}", text(&o));

    // An edited corpus: one digit of one outcome changed.
    let golden = std::fs::read_to_string(corpus()).unwrap();
    let edited = dir.path().join("edited.txt");
    let at = golden
        .find(" solved:")
        .map(|i| i + 8)
        .expect("a solved path");
    let mut bytes = golden.into_bytes();
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&edited, bytes).unwrap();
    let o = lab(
        &[
            "run",
            "--quiet",
            "--corpus",
            edited.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    let msg = text(&o);
    assert!(
        msg.contains("edited.txt:8: checksum mismatch"),
        "file:line: reason expected: {msg}"
    );
    assert!(!msg.contains("panicked"), "{msg}");
    assert!(!out.exists(), "nothing may be written for a refused run");
}

#[test]
fn run_refuses_an_existing_file_as_out_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("notes.txt");
    std::fs::write(&out, "keep me").unwrap();
    let c = corpus();
    let args = |force: bool| {
        let mut a = vec![
            "run", "--quiet", "--corpus", &c, "--cycles", "1", "--scale", "0.01", "--out",
        ];
        a.push(out.to_str().unwrap());
        if force {
            a.push("--force");
        }
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let refused = args(false);
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    let o = lab(&refused, dir.path());
    fails_saying(&o, "already exists and is not a directory");
    fails_saying(&o, "--force");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "nothing else may be written");

    let forced = args(true);
    let forced: Vec<&str> = forced.iter().map(String::as_str).collect();
    let o = lab(&forced, dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.join("report.json").is_file());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["notes.txt"], "no hidden copy is left behind");
}

#[test]
fn corpus_generate_never_replaces_a_file_without_out_and_force() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = std::fs::read(corpus()).unwrap();
    let o = lab(
        &["corpus", "generate", "--seed", "2", "--cycles", "5"],
        dir.path(),
    );
    fails_saying(&o, "--out");
    assert_eq!(
        std::fs::read(corpus()).unwrap(),
        shipped,
        "shipped corpus untouched"
    );

    let out = dir.path().join("mine.txt");
    std::fs::write(&out, "keep me").unwrap();
    let gen = |extra: &[&str]| {
        let mut a = vec![
            "corpus", "generate", "--seed", "2", "--cycles", "2", "--out",
        ];
        a.push(out.to_str().unwrap());
        a.extend(extra);
        lab(&a, dir.path())
    };
    fails_saying(&gen(&[]), "already exists");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    let o = gen(&["--force"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_ne!(std::fs::read_to_string(&out).unwrap(), "keep me");
}

#[test]
fn numeric_arguments_are_bounded_with_plain_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fails_saying(&lab(&["plan", "--quota", "1e9"], d), "at most 4096");
    let o = lab(&["plan", "--quota", "inf"], d);
    fails_saying(&o, "not finite");
    assert!(!text(&o).contains("not a positive number"), "{}", text(&o));
    fails_saying(&lab(&["plan", "--quota", "-2"], d), "--quota -2 is invalid");
    fails_saying(&lab(&["run", "--quota", "5000"], d), "at most 4096");
    fails_saying(&lab(&["run", "--cycles", "0"], d), "at least 1 cycle");
    let o = lab(&["run", "--scale", "-1"], d);
    fails_saying(&o, "--scale -1 is invalid: give a positive number");
    assert!(!text(&o).contains("unexpected argument"), "{}", text(&o));
    fails_saying(
        &lab(
            &["posture", "set", "--cordon-enter-window-ms", "86400001"],
            d,
        ),
        "one day",
    );
    fails_saying(
        &lab(&["corpus", "generate", "--cycles", "0", "--out", "x"], d),
        "at least 1 cycle",
    );
    fails_saying(
        &lab(
            &["corpus", "generate", "--cycles", "4000000000", "--out", "x"],
            d,
        ),
        "--cycles 4000000000 is invalid: at most 100000 cycles",
    );
    assert!(
        std::fs::read_dir(d).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn an_unwritable_out_is_refused_before_the_run_starts() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let o = lab(
        &["run", "--quiet", "--corpus", &c, "--out", "/proc/forbidden"],
        dir.path(),
    );
    fails_saying(&o, "--out /proc/forbidden cannot be written");
    // Refused before the run: no run's figures were printed.
    assert!(
        !text(&o).contains("parity"),
        "no run happened: {}",
        text(&o)
    );
}

#[test]
fn error_texts_say_each_thing_once_and_fit_what_failed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = lab(&["run", "--quiet", "--corpus", "missing.txt"], d);
    fails_saying(&o, "missing.txt");
    assert_eq!(
        text(&o).matches("No such file or directory").count(),
        1,
        "{}",
        text(&o)
    );
    let o = lab(&["plan", "--quota", "0"], d);
    fails_saying(&o, "--quota 0 is invalid");
    assert_eq!(text(&o).matches("is invalid").count(), 1, "{}", text(&o));
    let o = lab(&["report", "missing.json", "--out", "r"], d);
    fails_saying(&o, "missing.json");
    assert!(
        !text(&o).contains("writable"),
        "a read failure: {}",
        text(&o)
    );
}

#[test]
fn compare_gate_and_report_refuse_an_existing_file_as_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("notes.txt");
    std::fs::write(&out, "keep me").unwrap();
    let o = out.to_str().unwrap();
    let c = corpus();
    let budgets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
    let b = budgets.to_str().unwrap();
    for args in [
        vec![
            "compare", "--quiet", "--corpus", &c, "--cycles", "1", "--out", o,
        ],
        vec![
            "gate",
            "--profile",
            "A",
            "--reference",
            "self",
            "--budgets",
            b,
            "--quiet",
            "--corpus",
            &c,
            "--out",
            o,
        ],
        vec!["report", "missing.json", "--out", o],
    ] {
        fails_saying(
            &lab(&args, dir.path()),
            "already exists and is not a directory",
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    }
}

#[test]
fn config_values_are_bounded_like_the_command_line_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let c = corpus();
    let cfg = dir.path().join("fleet.toml");
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    std::fs::write(&cfg, "[posture]\ncordon_exit_clean_ms = 99999999999\n").unwrap();
    let cf = cfg.to_str().unwrap();
    for verb in ["run", "compare", "parity"] {
        let mut args = vec![verb, "--quiet", "--corpus", &c, "--config", cf];
        if verb != "parity" {
            args.extend(["--out", o]);
        }
        let r = lab(&args, dir.path());
        fails_saying(
            &r,
            &format!(
                "config {cf}: [posture] cordon_exit_clean_ms = 99999999999 is invalid: at most 86400000 ms (one day)"
            ),
        );
        assert!(!text(&r).contains("parity ok"), "nothing ran: {}", text(&r));
        assert!(!out.exists(), "nothing written for {verb}");
    }
    std::fs::write(&cfg, "[budget]\nsolver_cpus = 1000000000\n").unwrap();
    fails_saying(
        &lab(
            &["run", "--corpus", &c, "--config", cf, "--out", o],
            dir.path(),
        ),
        "[budget] solver_cpus = 1000000000 is invalid: at most 4096 cores",
    );
    std::fs::write(&cfg, "[posture]\ncordon_enter_window_ms = 0\n").unwrap();
    fails_saying(
        &lab(
            &["run", "--corpus", &c, "--config", cf, "--out", o],
            dir.path(),
        ),
        &format!("config {cf}: fleet config [posture]: cordon_enter_window_ms = 0 is invalid"),
    );
    let r = Command::new(env!("CARGO_BIN_EXE_fleet-lab"))
        .args(["run", "--corpus", &c, "--out", o])
        .current_dir(dir.path())
        .env("DEGENBOT_PUMP_UNUSED", "1")
        .env("DEGENBOT_BACKSTOP_INTERVAL_MS", "86400001")
        .output()
        .unwrap();
    fails_saying(
        &r,
        "environment variable DEGENBOT_BACKSTOP_INTERVAL_MS: [pump] backstop_interval_ms = 86400001",
    );
    assert!(!out.exists());
}
