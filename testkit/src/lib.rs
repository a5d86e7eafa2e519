//! ferroccl's test kit: what the tests (`tests/`) and the `ferroccl` command
//! (`examples/ferroccl`) share, and what the runtime a user links (`host-shim`) must never
//! carry.
//!
//! - [`reference`](mod@reference): the independent host reference of every operator, type and copy;
//! - [`coll`]: the collective correctness matrix and its expectations, run on any
//!   [`coll::group::RankGroup`]: GPU ranks ([`coll::gpu::GpuGroup`]) or host-twin ranks
//!   ([`coll::twin::TwinGroup`], the device code on CPU threads);
//! - [`selftest`]: the GPU self-tests (the device's unit tests) and their harness;
//! - [`shmem`]: a symmetric heap whose PEs run on the host twin;
//! - [`matmul`](mod@matmul): collective matmuls on twin ranks, and their reference;
//! - [`shared`]: shared-memory files, the twin's memory exported to other processes;
//! - [`launch`]: `ferroccl run`'s PE launcher (one process per PE).

pub mod coll;
pub mod launch;
pub mod matmul;
pub mod reference;
pub mod selftest;
pub mod shared;
pub mod shmem;

/// The message a thread panicked with (its payload's `&str` or `String`), for the error
/// or the test failure that reports the panic.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (None, Some(s)) => s.clone(),
        (None, None) => "a panic without a message".to_owned(),
    }
}
