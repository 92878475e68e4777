//! The fuzz campaign's corpus, replayed on every `cargo test` (docs/fuzzing.md): every
//! input the fuzzers kept (fuzz/corpus/<target>), every finding (fuzz/regressions/<target>)
//! and the seeds, through the same harnesses the fuzz targets call. CI needs no fuzzer.

#[path = "../fuzz/src/lib.rs"]
mod harness;

use std::path::Path;

#[test]
fn the_committed_corpus_replays_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut total = 0;
    for (target, run) in harness::TARGETS {
        let mut n = 0;
        let mut dirs = vec![root.join("corpus").join(target), root.join("regressions").join(target)];
        match target {
            "capture" | "analyze" => dirs.push(root.join("seeds/capture")),
            "wire" | "link" => dirs.push(root.join("seeds/wire")),
            _ => {}
        }
        for d in dirs {
            let Ok(rd) = std::fs::read_dir(&d) else { continue };
            let mut files: Vec<_> = rd.flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let data = std::fs::read(&f).unwrap();
                // A panic names the input: `cargo fuzz run <target> <file>` reproduces it.
                let r = std::panic::catch_unwind(|| run(&data));
                assert!(r.is_ok(), "{target}: {} panicked", f.display());
                n += 1;
            }
        }
        assert!(n > 0, "no corpus for {target}");
        total += n;
    }
    eprintln!("{total} corpus inputs replayed");
}
