//! The GPU machines' scripts (bench/gpu/) run here with stand-ins for what only those
//! machines have: `nvidia-smi`, `nvcc`, NVIDIA's NCCL, nccl-tests' programs and an MPI
//! launcher. What this shows is the scripts' own flow (every step reached, in every mode,
//! and its results file written), which otherwise first runs on a lent GPU, where a script
//! that stops half-way costs the time of the machine.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// nccl-tests' programs, as bench/gpu/nccl.sh runs them.
const PROGRAMS: [&str; 8] = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv", "gather", "scatter", "alltoall"];

fn write_program(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A scratch folder of stand-ins: `bin/` (nvidia-smi), `cuda/bin/nvcc`, `nvidia/nccl`
/// (headers and a library file), `mpi/` (include, lib, bin/mpiexec running its program
/// `-n` times), and `nccl-tests/` whose Makefile writes programs that print nccl-tests'
/// summary lines.
fn stand_ins(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("ferroccl-gpu-scripts-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    write_program(&root.join("bin/nvidia-smi"), "#!/bin/sh\ncase \"$*\" in -L) printf 'GPU 0: Stand-in\\nGPU 1: Stand-in\\n';; *) printf '0, Stand-in GPU, 580\\n1, Stand-in GPU, 580\\n';; esac\n");
    // nvcc: `-o FILE` gets a program that prints one check line.
    write_program(
        &root.join("cuda/bin/nvcc"),
        "#!/usr/bin/env bash\nout=\nprev=\nfor a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n[ -n \"$out\" ] || exit 0\nprintf '#!/bin/sh\\necho \"rank 0: stand-in: ok\"\\n' > \"$out\"\nchmod +x \"$out\"\n",
    );
    fs::create_dir_all(root.join("nvidia/nccl/include")).unwrap();
    fs::create_dir_all(root.join("nvidia/nccl/lib")).unwrap();
    fs::write(root.join("nvidia/nccl/lib/libnccl.so.2"), "").unwrap();
    fs::create_dir_all(root.join("mpi/include")).unwrap();
    fs::create_dir_all(root.join("mpi/lib")).unwrap();
    write_program(
        &root.join("mpi/bin/mpiexec"),
        "#!/usr/bin/env bash\n[ \"$1\" = --version ] && { echo 'Version: stand-in'; exit 0; }\nn=1\nwhile [ $# -gt 0 ]; do case $1 in -n) n=$2; shift 2;; -launcher) shift 2;; *) break;; esac; done\nfor _ in $(seq \"$n\"); do \"$@\" || exit $?; done\n",
    );
    let programs = PROGRAMS.map(|p| format!("{p}_perf")).join(" ");
    fs::create_dir_all(root.join("nccl-tests")).unwrap();
    fs::write(
        root.join("nccl-tests/Makefile"),
        format!("all:\n\tmkdir -p build\n\tfor t in {programs}; do printf '#!/bin/sh\\necho \"# Out of bounds values : 0 OK\"\\necho \"# Avg bus bandwidth    : 1.5\"\\n' > build/$$t; chmod +x build/$$t; done\n"),
    )
    .unwrap();
    fs::write(root.join("libnccl.so"), "").unwrap();
    root
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs `script` (bench/gpu/'s) with `args` on the stand-ins; its output when it fails.
fn run(root: &Path, script: &str, args: &[&Path], env: &[(&str, &Path)]) -> String {
    let path = format!("{}:{}", root.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("bench/gpu").join(script)).args(args).current_dir(repo());
    cmd.env("PATH", path).env("NVIDIA_LIBS", root.join("nvidia")).env("CUDA_HOME", root.join("cuda")).env("TMPDIR", root).env("NGPUS", "2").env("DEVICE", "2 x stand-in");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script} failed: {}\n{text}", out.status);
    text
}

#[test]
fn nccl_sh_runs_every_program_on_both_libraries_in_both_modes() {
    let root = stand_ins("nccl");
    let out = root.join("out");
    run(&root, "nccl.sh", &[&root.join("libnccl.so"), &root.join("nccl-tests"), &out], &[("MPI_HOME", &root.join("mpi"))]);
    let json: serde_json::Value = serde_json::from_str(&fs::read_to_string(out.join("nccl_abi.json")).expect("nccl.sh wrote no nccl_abi.json")).unwrap();
    let rows = json["rows"].as_array().expect("nccl_abi.json has no rows");
    for library in ["NCCL", "ferroccl"] {
        for program in PROGRAMS {
            for mode in ["-g 2", "mpiexec -n 2 -g 1"] {
                let row = rows.iter().find(|r| r["library"] == library && r["test"] == format!("{program}_perf") && r["mode"] == mode);
                let row = row.unwrap_or_else(|| panic!("no row of {library} {program}_perf {mode}:\n{json:#}"));
                assert_eq!((&row["status"], &row["wrong"]), (&serde_json::json!("ran"), &serde_json::json!(0)), "{row}");
            }
        }
    }
    let two_ranks = rows.iter().find(|r| r["test"] == "two_ranks").expect("two_ranks.cu's row is missing");
    assert_eq!(two_ranks["checks"], serde_json::json!(["rank 0: stand-in: ok"]), "{two_ranks}");
    assert_eq!(rows.len(), 1 + 2 * PROGRAMS.len() * 2, "rows beyond those expected:\n{json:#}");
    let _ = fs::remove_dir_all(&root);
}

/// A carry folder (bench/gpu/pack.sh's layout) of stand-in programs: `ferroccl` (`test`,
/// `coll` print what the real ones end with, `bench --json FILE` writes a sweep of one
/// size back to back and in a graph; `run -n N PROGRAM …` runs PROGRAM N times with `RANK`
/// set), `ferroccl-matmul` (one result line of the real one's form, its pieces as the
/// real one chooses them),
/// `jacobi` and `shift`.
fn carry(root: &Path) -> PathBuf {
    let carry = root.join("carry");
    write_program(
        &carry.join("bin/ferroccl"),
        "#!/usr/bin/env bash\ncase $1 in\n  test) echo '27 passed, 0 failed';;\n  coll) echo '1620 cases, 0 wrong across the 2 processes';;\n  bench) json=; prev=; for a in \"$@\"; do [ \"$prev\" = --json ] && json=$a; prev=$a; done\n    [ -z \"$json\" ] || echo '{\"command\":\"stand-in\",\"device\":\"stand-in\",\"date\":\"stand-in\",\"rows\":[{\"function\":\"all_reduce\",\"timing\":\"back-to-back\",\"size\":8},{\"function\":\"all_reduce\",\"timing\":\"graph\",\"size\":8}]}' > \"$json\"\n    echo 'bench stand-in';;\n  run) shift; n=1\n    while [ $# -gt 0 ]; do case $1 in -n) n=$2; shift 2;; --devices|--grace) shift 2;; *) break;; esac; done\n    for r in $(seq 0 $((n - 1))); do RANK=$r \"$@\" || exit $?; done;;\n  *) exit 2;;\nesac\n",
    );
    write_program(
        &carry.join("bin/ferroccl-matmul"),
        "#!/usr/bin/env bash\ncopies=engines alone= pieces=\nwhile [ $# -gt 0 ]; do case $1 in --collective) c=${2//-/}; shift 2;; -m) m=$2; shift 2;; -k) k=$2; shift 2;; -n) n=$2; shift 2;; --sm-copies) copies=sms:$2; shift 2;; --pieces) pieces=$2; shift 2;; --gemm-alone) alone=',\"gemm_alone_us\":80.0'; shift;; *) shift;; esac; done\n[ -n \"$pieces\" ] || { [ $c = reducescatter ] && [ $m -ge 1024 ] && pieces=2 || pieces=1; }\nprintf '{\"checked\":1,\"collective\":\"%s\",\"copies\":\"%s\",\"pieces\":%s,\"dtype\":\"f16\",\"iters\":20,\"k\":%s,\"m\":%s,\"n\":%s,\"max_error_in_eps\":0.01,\"nranks\":2,\"rank\":%s,\"tc_util\":0.7,\"tflops\":1.0,\"time_us\":100.0%s}\\n' \"$c\" \"$copies\" \"$pieces\" \"$k\" \"$m\" \"$n\" \"${RANK:-0}\" \"$alone\"\n",
    );
    for example in ["jacobi", "shift"] {
        write_program(&carry.join("bin").join(example), "#!/bin/sh\necho 'every check held'\n");
    }
    fs::write(carry.join("bin/BUILD"), "0000000\n").unwrap();
    carry
}

#[test]
fn gpus_sh_parts_reach_every_step_and_write_their_results() {
    let root = stand_ins("parts");
    let carry = carry(&root);
    let out = root.join("out");
    for part in ["tests", "matrix", "shmem", "matmul", "bench"] {
        run(&root, "gpus.sh", &[Path::new(part), &carry, &out], &[]);
    }
    let raw = |dir: &str, prefix: &str| {
        let entry = fs::read_dir(out.join("raw").join(dir)).unwrap().map(|e| e.unwrap().path()).find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix));
        fs::read_to_string(entry.unwrap_or_else(|| panic!("no raw/{dir}/{prefix}* file"))).unwrap()
    };
    let tests = raw("selftest", "gpus-2-");
    assert_eq!(tests.matches("27 passed, 0 failed").count(), 2, "the first and the last GPU's self-tests:\n{tests}");
    let matrix = raw("selftest", "matrix-2-");
    assert_eq!(matrix.matches("0 wrong across").count(), 4, "the device's choice, one-shot, two-shot, NVLS:\n{matrix}");
    let shmem = raw("shmem", "procs-2-");
    assert_eq!(shmem.matches("every check held").count(), 4, "jacobi and shift, one PE a process, 2 processes:\n{shmem}");
    for text in [&tests, &matrix, &shmem] {
        assert!(!text.contains("exit status"), "a step failed:\n{text}");
    }
    let json: serde_json::Value = serde_json::from_str(&fs::read_to_string(out.join("collective_matmul.json")).expect("matmul.sh wrote no collective_matmul.json")).unwrap();
    let rows = json["rows"].as_array().expect("collective_matmul.json has no rows");
    assert_eq!(rows.len(), 5 * (3 * 2 + 1), "5 shapes x (3 collectives x 2 copy designs + the reduce-scatter's other pieces):\n{json:#}");
    for pieces in [1, 2] {
        assert_eq!(rows.iter().filter(|r| r["collective"] == "reducescatter" && r["copies"] == "engines" && r["pieces"] == pieces).count(), 5, "{pieces} piece(s), every shape:\n{json:#}");
    }
    assert!(rows.iter().all(|r| r["gpus"] == 2 && r["time_us"] == 100.0), "{json:#}");
    for (file, timing) in [("ring.json", "back-to-back"), ("latency.json", "graph")] {
        let json: serde_json::Value = serde_json::from_str(&fs::read_to_string(out.join(file)).unwrap_or_else(|_| panic!("ring.sh wrote no {file}"))).unwrap();
        assert!(json["rows"].as_array().is_some_and(|rows| rows.iter().any(|r| r["timing"] == timing)), "{file}: {json:#}");
    }
    let _ = fs::remove_dir_all(&root);
}
