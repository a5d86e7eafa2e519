//! The bootstrap with PEs on threads of this process (each its own socket end, as in
//! separate processes); `examples/ferroccl`'s tests run it across processes.

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::thread;

use super::*;

fn rendezvous(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ferroccl-bs-{}-{name}.sock", std::process::id()))
}

/// Runs `body(pe)` for every PE in `pes` on a thread of its own; the results by PE.
fn on_threads<T: Send>(pes: impl IntoIterator<Item = usize>, body: impl Fn(usize) -> T + Sync) -> Vec<T> {
    thread::scope(|s| {
        let body = &body;
        let handles: Vec<_> = pes.into_iter().map(|pe| s.spawn(move || body(pe))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn bootstrap_error(r: Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(Error::Bootstrap(why)) => why,
        other => panic!("expected a bootstrap error, got {other:?}"),
    }
}

/// A file holding `text`, opened for reading.
fn file_with(dir: &Path, name: &str, text: &str) -> std::fs::File {
    let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(dir.join(name)).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn every_pe_gets_every_part_with_its_descriptors() {
    let path = rendezvous("gather");
    let dir = std::env::temp_dir().join(format!("ferroccl-bs-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = 4;
    on_threads(0..n, |pe| {
        let mut b = Bootstrap::join(pe, n, &path, Duration::from_secs(20)).unwrap();
        assert_eq!((b.pe(), b.n_pes()), (pe, n));
        let files: Vec<std::fs::File> = (0..pe % 3).map(|k| file_with(&dir, &format!("pe{pe}-{k}"), &format!("PE {pe} file {k}"))).collect();
        let fds: Vec<BorrowedFd<'_>> = files.iter().map(AsFd::as_fd).collect();
        for round in 0..3u8 {
            let parts = b.all_gather("exchange", &[pe as u8, round], &fds).unwrap();
            assert_eq!(parts.len(), n);
            for (from, part) in parts.into_iter().enumerate() {
                assert_eq!(part.bytes, [from as u8, round]);
                assert_eq!(part.fds.len(), from % 3);
                for (k, fd) in part.fds.into_iter().enumerate() {
                    // Every copy shares one file offset: read at a position, not from it.
                    let mut text = vec![0u8; 64];
                    let len = std::fs::File::from(fd).read_at(&mut text, 0).unwrap();
                    assert_eq!(String::from_utf8_lossy(&text[..len]), format!("PE {from} file {k}"));
                }
            }
        }
        b.barrier().unwrap();
    });
    assert!(!path.exists(), "PE 0 removes the rendezvous socket once everyone is there");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn one_pe_needs_no_socket() {
    let mut b = Bootstrap::join(0, 1, Path::new("/nonexistent/dir/x.sock"), Duration::from_secs(1)).unwrap();
    let parts = b.all_gather("alone", b"me", &[]).unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].bytes, b"me");
    b.barrier().unwrap();
}

#[test]
fn a_pe_that_never_arrives_fails_everyone_within_the_budget() {
    let path = rendezvous("missing");
    let budget = Duration::from_millis(300);
    let start = Instant::now();
    let errors = on_threads(0..2, |pe| bootstrap_error(Bootstrap::join(pe, 3, &path, budget)));
    assert!(start.elapsed() < budget + ANSWER_GRACE, "{:?}", start.elapsed());
    for why in errors {
        assert!(why.contains("PE(s) 2 of 3 never reached"), "{why}");
    }
    // PE 0 never listening: the others give up on their own.
    let start = Instant::now();
    let why = bootstrap_error(Bootstrap::join(1, 2, &rendezvous("no-root"), budget));
    assert!(why.contains("PE 0 never opened"), "{why}");
    assert!(start.elapsed() < budget + Duration::from_secs(1));
}

#[test]
fn a_pe_that_leaves_fails_the_next_call_of_everyone_and_every_call_after() {
    let path = rendezvous("leaves");
    let errors = on_threads(0..3, |pe| {
        let mut b = Bootstrap::join(pe, 3, &path, Duration::from_secs(20)).unwrap();
        b.barrier().unwrap();
        if pe == 2 {
            return None;
        }
        let first = bootstrap_error(b.all_gather("malloc", &[1], &[]));
        let later = bootstrap_error(b.barrier());
        assert_eq!(first, later);
        Some(first)
    });
    for why in errors.into_iter().flatten() {
        assert!(why.contains("PE 2 closed its bootstrap connection") && why.contains("malloc (collective call 2)"), "{why}");
    }
}

#[test]
fn pes_at_different_calls_all_fail() {
    let path = rendezvous("calls");
    let errors = on_threads(0..3, |pe| {
        let mut b = Bootstrap::join(pe, 3, &path, Duration::from_secs(20)).unwrap();
        bootstrap_error(if pe == 1 { b.all_gather("malloc", &[], &[]).map(drop) } else { b.barrier() })
    });
    for why in errors {
        assert!(why.contains("PE 1 is at malloc (collective call 1) while PE 0 is at barrier (collective call 1)"), "{why}");
    }
}

#[test]
fn pes_started_for_different_counts_all_fail() {
    let path = rendezvous("counts");
    let errors = on_threads(0..2, |pe| bootstrap_error(Bootstrap::join(pe, 2 + pe, &path, Duration::from_secs(20))));
    for why in errors {
        assert!(why.contains("PE 1 was started for 3 PEs, PE 0 for 2"), "{why}");
    }
}

#[test]
fn a_pe_0_that_exits_fails_the_others_at_once() {
    let path = rendezvous("root-exits");
    let budget = Duration::from_secs(20);
    let start = Instant::now();
    let errors = on_threads(0..3, |pe| {
        let mut b = Bootstrap::join(pe, 3, &path, budget).unwrap();
        (pe != 0).then(|| bootstrap_error(b.barrier()))
    });
    assert!(start.elapsed() < budget, "end of file, not the budget, ends their wait");
    for why in errors.into_iter().flatten() {
        assert!(why.contains("PE 0 closed its bootstrap connection"), "{why}");
    }
}

#[test]
fn a_path_that_is_not_a_socket_is_left_alone() {
    let path = rendezvous("file");
    std::fs::write(&path, "precious").unwrap();
    let why = bootstrap_error(Bootstrap::join(0, 2, &path, Duration::from_secs(1)));
    assert!(why.contains("is not a socket"), "{why}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
    std::fs::remove_file(&path).unwrap();
}

/// Three PEs on threads, each watched once joined (but PE `unwatched`, whose bootstrap is
/// dropped at once, closing its connection as a process that dies does), its failures
/// collected (tagged with the PE); `then(pe, watch, heard)` decides what each watched PE
/// does (`heard()`: whether its watcher has reported a failure yet).
fn watched(name: &str, unwatched: Option<usize>, then: impl Fn(usize, Watch, &dyn Fn() -> bool) + Sync) -> Vec<(usize, String)> {
    let path = rendezvous(name);
    let (failures, heard) = std::sync::mpsc::channel();
    on_threads(0..3, |pe| {
        let b = Bootstrap::join(pe, 3, &path, Duration::from_secs(20)).unwrap();
        if unwatched == Some(pe) {
            return;
        }
        let failures = failures.clone();
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = flag.clone();
        let watch = Watch::new(b, "rank", Box::new(move |why| {
            seen.store(true, std::sync::atomic::Ordering::Release);
            failures.send((pe, why)).unwrap();
        }))
        .unwrap();
        then(pe, watch, &|| flag.load(std::sync::atomic::Ordering::Acquire));
    });
    drop(failures);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut all = Vec::new();
    while let Ok(f) = heard.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        all.push(f);
    }
    all.sort();
    all
}

/// Until `heard()` holds, or 10 s have passed (a loaded machine may take long to relay).
fn until_heard(heard: &dyn Fn() -> bool) {
    let start = Instant::now();
    while !heard() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_watched_pe_whose_connection_ends_is_named_to_every_other() {
    // PE 1's connection ends without a leave; the others stay until they have heard.
    let failures = watched("watch-dies", Some(1), |_, watch, heard| {
        until_heard(heard);
        drop(watch);
    });
    assert_eq!(failures.iter().map(|(pe, _)| *pe).collect::<Vec<_>>(), [0, 2], "{failures:?}");
    assert!(failures.iter().all(|(_, why)| why.contains("rank 1's process ended")), "{failures:?}");
}

#[test]
fn watched_pes_that_leave_fail_nobody() {
    let failures = watched("watch-leave", None, |pe, watch, _| {
        std::thread::sleep(Duration::from_millis(100 * pe as u64));
        drop(watch);
    });
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn a_watched_pes_abort_reaches_every_other_with_its_reason() {
    let failures = watched("watch-abort", None, |pe, watch, heard| {
        if pe == 2 {
            watch.abort("rank 2 aborted its communicator");
        } else {
            // PE 0 relays the abort to PE 1: neither leaves before it has heard.
            until_heard(heard);
        }
        drop(watch);
    });
    assert_eq!(failures.iter().map(|(pe, _)| *pe).collect::<Vec<_>>(), [0, 1], "{failures:?}");
    assert!(failures.iter().all(|(_, why)| why == "rank 2 aborted its communicator"), "{failures:?}");
}
