//! The `ferroccl` command on a machine without a GPU, run as a user runs it: `bench` and
//! `coll` on the host twin say so and refuse, before doing anything, what the twin cannot
//! do; the single-GPU benchmarks say they need a GPU. On a machine with a GPU these tests
//! check nothing (the commands run on the GPU there).

use std::process::{Command, Output};

/// Whether this machine has no GPU (no CUDA driver, or no device): the twin's case.
fn no_gpu() -> bool {
    match host_shim::init() {
        Ok(_) => {
            eprintln!("a GPU is present: the host twin's command lines are not checked here");
            false
        }
        Err(_) => true,
    }
}

fn ferroccl(line: &str) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ferroccl")).args(line.split_whitespace()).env("FERROCCL_LOG", "warn").output().unwrap();
    eprintln!("ferroccl {line}: {}\n{}{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Options the twin cannot honour fail at once, non-zero, naming the option, having
/// printed nothing on stdout (no table, not even the twin's notice).
#[test]
fn options_the_twin_cannot_honour_fail_before_anything_runs() {
    if !no_gpu() {
        return;
    }
    for (line, option) in [
        ("bench --nccl", "--nccl"),
        ("bench all_reduce -b 8 -e 1G -f 2", "-e 1G"),
        ("bench --timing graph", "--timing graph"),
        ("bench --heap", "--heap"),
        ("bench --path stream", "--path stream"),
        ("bench --path typed", "--path typed"),
        ("bench --devices 0,1", "--devices"),
        ("coll --devices 0,1 --ranks 4", "--devices"),
        ("coll --big 3145728", "--big 3145728"),
        ("bench -e 32M", "-e 32M"),
    ] {
        let out = ferroccl(line);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{line}");
        assert!(stderr.contains(&format!("cannot take {option}:")) && stderr.contains("host twin"), "{line}: {stderr}");
        assert_eq!(text(&out.stdout), "", "{line} ran something before refusing");
    }
    let out = ferroccl("coll --path typed");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the matrix has cases no typed call makes"), "{}", text(&out.stderr));
    let out = ferroccl("bench reduce_copy");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("bench reduce_copy runs on GPUs only"), "{}", text(&out.stderr));
}

/// A small sweep runs on the twin: the notice first, checked rows, the closing line.
#[test]
fn bench_runs_on_the_twin_and_says_so() {
    if !no_gpu() {
        return;
    }
    let out = ferroccl("bench all_reduce -b 8 -e 1K -f 8 -n 1 -w 0");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let first = stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("# no GPU (") && first.contains("running on the host twin") && first.contains("not GPU speeds"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    // 8, 64 and 512 bytes; each row checked right out of place and in place.
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(rows.iter().all(|r| r.split_whitespace().filter(|f| *f == "0").count() >= 2), "{stdout}");
    assert!(stdout.lines().last().unwrap_or_default().contains("3 rows in") && stdout.contains("on the host twin: CPU threads, not a GPU"), "{stdout}");
}

/// `coll` falls back to the twin, says so, and checks its cases.
#[test]
fn coll_runs_on_the_twin_and_says_so() {
    if !no_gpu() {
        return;
    }
    let out = ferroccl("coll --big 1000 --algo ring all_gather");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.lines().next().unwrap_or_default().contains("running on the host twin"), "{stdout}");
    assert!(stdout.contains("collective matrix: 2 on host twin"), "{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.contains(" 0 wrong") && last.contains("on the host twin") && !last.starts_with("0 cases"), "{stdout}");
}

/// `bench --procs 2` runs each rank in a process of its own on the twin: one table (rank
/// 0's), every row checked by both processes, the JSON written once; a lone process and
/// an id given by hand are refused.
#[test]
fn bench_runs_as_processes_on_the_twin() {
    if !no_gpu() {
        return;
    }
    let json = std::env::temp_dir().join(format!("ferroccl-procs-{}.json", std::process::id()));
    let out = ferroccl(&format!("bench --procs 2 all_reduce all_gather -b 8 -e 4K -f 8 --json {}", json.display()));
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("running on the host twin").count(), 1, "{stdout}");
    let rows: Vec<Vec<&str>> = stdout.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 8, "two functions, four sizes: {stdout}");
    assert!(rows.iter().all(|r| r.len() == 13 && r[8] == "0" && r[12] == "0"), "every row's two wrong counts are 0: {stdout}");
    let written = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    assert!(written.contains("in as many processes") && written.contains("--procs 2") && written.contains("\"processes\": 2"), "{written}");
    for (line, says) in [("bench --procs 1", "at least 2 processes"), ("bench --procs 2 --ranks 3", "one rank per process"), ("bench --comm-id 00", "--comm-id is for the processes")] {
        let out = ferroccl(line);
        assert_eq!(out.status.code(), Some(1), "{line}");
        assert!(text(&out.stderr).contains(says), "{line}: {}", text(&out.stderr));
    }
}

/// `coll --procs N` runs the matrix with each rank in a process of its own on the twin:
/// every process checks its own rank's outputs, and rank 0 prints the setup and the total
/// once; what cannot run that way is refused before any case runs (a configuration no
/// rank runs with, by every process).
#[test]
fn coll_runs_as_processes_on_the_twin() {
    if !no_gpu() {
        return;
    }
    for (procs, filter) in [(2, "count=7"), (3, "all_gather")] {
        let out = ferroccl(&format!("coll --procs {procs} --big 1000 {filter}"));
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
        assert_eq!(stdout.matches("running on the host twin").count(), 1, "{stdout}");
        assert!(stdout.contains(&format!("{procs} ranks ×")) && stdout.contains(&format!("{procs} processes:")), "{stdout}");
        let last = stdout.lines().last().unwrap_or_default();
        assert!(last.contains(&format!(" 0 wrong across the {procs} processes")) && !last.starts_with("0 cases"), "{stdout}");
    }
    for (line, says) in [
        ("coll --procs 1", "at least 2 processes"),
        ("coll --procs 2 --ranks 3", "one rank per process"),
        ("coll --procs 2 --heap", "not on a symmetric heap"),
        ("coll --comm-id 00", "--comm-id is for the processes"),
        ("coll --procs 2 --algo nvls", "forces NVLS needs at least 192 threads"),
    ] {
        let out = ferroccl(line);
        assert_eq!(out.status.code(), Some(1), "{line}");
        assert!(text(&out.stderr).contains(says), "{line}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "", "{line} ran something before refusing");
    }
}
