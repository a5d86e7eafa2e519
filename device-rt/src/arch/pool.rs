//! The twin's OS threads, kept between launches: a launch hands each GPU thread to an idle
//! pool thread, and starts a new one only when none is idle.
//!
//! Starting an OS thread costs more than most of what a twin's GPU thread does: 768
//! threads (a call kernel of 3 channels × 128 threads on 2 ranks) took 115-138 ms to
//! start and join on 2 cores, and a stream-ordered call launches one such kernel per rank.
//! A pool thread that has run its job goes back to the idle list and blocks until the
//! next; none ever exits, so no thread's stack is unmapped under it (the twin once died
//! in `pthread_detach` on a detached thread whose stack was already gone).

use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use super::imp::lock;

/// One GPU thread's work, its borrows checked by [`Scope::spawn`], and the count of its
/// scope's jobs not ended yet.
struct Job {
    run: Box<dyn FnOnce() + Send + 'static>,
    outstanding: Arc<Outstanding>,
}

/// The idle pool threads, each as the sender of its job channel.
static IDLE: Mutex<Vec<Sender<Job>>> = Mutex::new(Vec::new());

/// Jobs of one scope not ended yet.
#[derive(Default)]
struct Outstanding {
    count: Mutex<usize>,
    ended: Condvar,
}

impl Outstanding {
    /// One job ended. Ordering: the mutex's release pairs with [`Outstanding::wait`]'s
    /// acquire, so everything the job did happens before its scope returns.
    fn end_one(&self) {
        let mut count = lock(&self.count);
        *count -= 1;
        if *count == 0 {
            self.ended.notify_all();
        }
    }

    fn wait(&self) {
        let mut count = lock(&self.count);
        while *count > 0 {
            count = self.ended.wait(count).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Jobs that borrow from outside [`scope`] for at most `'env`.
pub(super) struct Scope<'env> {
    outstanding: Arc<Outstanding>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'env> Scope<'env> {
    /// Runs `run` on an idle pool thread, or on a new one (of `stack_bytes` of stack) when
    /// none is idle. `Err` when a new thread was needed and could not be started; `run`
    /// then never runs.
    pub(super) fn spawn(&self, stack_bytes: usize, run: impl FnOnce() + Send + 'env) -> std::io::Result<()> {
        let run: Box<dyn FnOnce() + Send + 'env> = Box::new(run);
        // SAFETY: `scope` returns only once every job it spawned has ended (`Outstanding`
        // is counted down after `run` and everything it borrowed were dropped), and `'env`
        // outlives that call, so nothing `run` borrows is gone while it runs.
        let run = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'env>, Box<dyn FnOnce() + Send + 'static>>(run) };
        *lock(&self.outstanding.count) += 1;
        let job = Job { run, outstanding: Arc::clone(&self.outstanding) };
        let idle = lock(&IDLE).pop();
        let unsent = match idle {
            Some(thread) => thread.send(job).err().map(|lost| lost.0),
            None => Some(job),
        };
        match unsent {
            None => Ok(()),
            Some(job) => start_thread(stack_bytes, job).inspect_err(|_| self.outstanding.end_one()),
        }
    }
}

/// Calls `f` with a scope for jobs, then waits until every job it spawned has ended (also
/// when `f` panics, whose panic is then resumed).
pub(super) fn scope<'env, R>(f: impl FnOnce(&Scope<'env>) -> R) -> R {
    let scope = Scope { outstanding: Arc::default(), _env: PhantomData };
    let result = panic::catch_unwind(AssertUnwindSafe(|| f(&scope)));
    scope.outstanding.wait();
    result.unwrap_or_else(|payload| panic::resume_unwind(payload))
}

/// Starts a pool thread that runs `first`, then every job sent to it; after each it goes
/// back on the idle list before its scope counts the job ended, so the next launch finds
/// it there.
fn start_thread(stack_bytes: usize, first: Job) -> std::io::Result<()> {
    let (to_thread, jobs) = channel::<Job>();
    to_thread.send(first).expect("the receiver is alive until the thread has started");
    std::thread::Builder::new().name("twin-gpu-thread".into()).stack_size(stack_bytes).spawn(move || {
        while let Ok(Job { run, outstanding }) = jobs.recv() {
            // The twin catches the kernel's own panics; none may end a pool thread.
            drop(panic::catch_unwind(AssertUnwindSafe(run)));
            lock(&IDLE).push(to_thread.clone());
            outstanding.end_one();
        }
    })?;
    Ok(())
}
