//! The named operations of [`Primitives`] (NCCL's `send`, `recv`, `copySend`,
//! `recvCopySend`, `recvReduceSend`, `recvReduceCopy`, `recvReduceCopySend`, `scatter`,
//! `gather`, …), each one call of `generic_op` or `scatter_gather_op` for one chunk.
//! Indices (`in_ix`, `out_ix`) are element offsets into the user buffers; the point-to-
//! point operations use the first peer of their side.

use super::{Fan, MulticastMovers, Primitives, Proto, buf};

impl<M: MulticastMovers, P: Proto, F: Fan> Primitives<M, P, F> {
    /// Sends `n` input elements from `in_ix` (pre-op applied).
    ///
    /// # Safety
    /// Every thread of the group calls it with the same arguments; the user buffers hold
    /// the elements addressed; `n` is at most one chunk (as `generic_op`).
    #[inline(never)]
    pub unsafe fn send(&mut self, in_ix: i64, n: i64) {
        const { assert!(F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the input holds elements
        // `in_ix..in_ix + n`, and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<false, true, { buf::INPUT }, { buf::NONE }, 1, 1, 1, false, false, false>(in_ix, -1, n) }
    }

    /// Sends `n` output elements from `out_ix` (an in-place all-gather's own block).
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn send_from_output(&mut self, out_ix: i64, n: i64) {
        const { assert!(F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the output holds elements
        // `out_ix..out_ix + n`, and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<false, true, { buf::OUTPUT }, { buf::NONE }, 1, 1, 0, false, false, false>(out_ix, -1, n) }
    }

    /// Receives `n` elements into the output at `out_ix`.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn recv(&mut self, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the output holds elements
        // `out_ix..out_ix + n`, and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<true, false, { buf::NONE }, { buf::OUTPUT }, 1, 1, 0, false, false, false>(-1, out_ix, n) }
    }

    /// Receives `n` elements into the output at `out_ix`, applying the operator's post-op
    /// (NCCL's `recv` with `postOp`: the last step of a reduction, NVLS reduce-scatter's
    /// reduce group).
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn recv_with_post_op(&mut self, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the output holds elements
        // `out_ix..out_ix + n`, and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<true, false, { buf::NONE }, { buf::OUTPUT }, 1, 1, 0, true, false, false>(-1, out_ix, n) }
    }

    /// Copies `n` input elements from `in_ix` to the output at `out_ix` and sends them.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn copy_send(&mut self, in_ix: i64, out_ix: i64, n: i64) {
        const { assert!(F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the input holds `in_ix..in_ix +
        // n` and the output `out_ix..out_ix + n`, and `n` is at most one chunk; the operand
        // counts are the ones `generic_op` asserts for these roles.
        unsafe { self.generic_op::<false, true, { buf::INPUT }, { buf::OUTPUT }, 1, 2, 1, false, false, false>(in_ix, out_ix, n) }
    }

    /// Receives `n` elements into the output at `out_ix` and sends them on.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn recv_copy_send(&mut self, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1 && F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the output holds elements
        // `out_ix..out_ix + n`, and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<true, true, { buf::NONE }, { buf::OUTPUT }, 1, 2, 0, false, false, false>(-1, out_ix, n) }
    }

    /// Receives `n` elements and sends them on without touching the user buffers.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn recv_send(&mut self, n: i64) {
        const { assert!(F::MAX_RECV >= 1 && F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, no user buffer is touched, and
        // `n` is at most one chunk; the operand counts are the ones `generic_op` asserts for
        // these roles.
        unsafe { self.generic_op::<true, true, { buf::NONE }, { buf::NONE }, 1, 1, 0, false, false, false>(-1, -1, n) }
    }

    /// Receives `n` elements, reduces them with the input at `in_ix`, sends the result.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn recv_reduce_send(&mut self, in_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1 && F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the input holds elements
        // `in_ix..in_ix + n`, and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<true, true, { buf::INPUT }, { buf::NONE }, 2, 1, 1, false, false, false>(in_ix, -1, n) }
    }

    /// Receives `n` elements, reduces them with the input at `in_ix`, stores the result
    /// (post-op applied: the last step of a reduction) in the output at `out_ix`.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn recv_reduce_copy(&mut self, in_ix: i64, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the input holds `in_ix..in_ix +
        // n` and the output `out_ix..out_ix + n`, and `n` is at most one chunk; the operand
        // counts are the ones `generic_op` asserts for these roles.
        unsafe { self.generic_op::<true, false, { buf::INPUT }, { buf::OUTPUT }, 2, 1, 1, true, false, false>(in_ix, out_ix, n) }
    }

    /// Receives `n` elements, reduces them with the input at `in_ix`, stores the result
    /// (post-op applied) in the output at `out_ix` and sends it on.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn recv_reduce_copy_send(&mut self, in_ix: i64, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1 && F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the input holds `in_ix..in_ix +
        // n` and the output `out_ix..out_ix + n`, and `n` is at most one chunk; the operand
        // counts are the ones `generic_op` asserts for these roles.
        unsafe { self.generic_op::<true, true, { buf::INPUT }, { buf::OUTPUT }, 2, 2, 1, true, false, false>(in_ix, out_ix, n) }
    }

    /// Direct [`Primitives::send`]: the input at `in_ix` goes straight into the next
    /// rank's output at `out_ix`.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn direct_send(&mut self, in_ix: i64, out_ix: i64, n: i64) {
        const { assert!(F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the input holds `in_ix..in_ix +
        // n`, and so does the next rank's output at `out_ix` (every rank's output has the same
        // layout, and where it published that buffer through `exchange_direct`; the FIFO
        // otherwise), and `n` is at most
        // one chunk; the operand counts are the ones `generic_op` asserts for these roles.
        unsafe { self.generic_op::<false, true, { buf::INPUT }, { buf::NONE }, 1, 1, 1, false, false, true>(in_ix, out_ix, n) }
    }

    /// Direct [`Primitives::send_from_output`].
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn direct_send_from_output(&mut self, out_ix: i64, n: i64) {
        const { assert!(F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, this rank's and the next rank's
        // outputs hold `out_ix..out_ix + n` (every rank's output has the same layout), and `n`
        // is at most one chunk; the operand counts are the ones `generic_op` asserts for these
        // roles.
        unsafe { self.generic_op::<false, true, { buf::OUTPUT }, { buf::NONE }, 1, 1, 0, false, false, true>(out_ix, out_ix, n) }
    }

    /// Direct [`Primitives::copy_send`].
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn direct_copy_send(&mut self, in_ix: i64, out_ix: i64, n: i64) {
        const { assert!(F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the input holds `in_ix..in_ix +
        // n`, this rank's and the next rank's outputs `out_ix..out_ix + n` (every rank's output
        // has the same layout), and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<false, true, { buf::INPUT }, { buf::OUTPUT }, 1, 2, 1, false, false, true>(in_ix, out_ix, n) }
    }

    /// Direct [`Primitives::recv`]: the data is already in the output; only the steps move.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn direct_recv(&mut self, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the output holds
        // `out_ix..out_ix + n`, and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<true, false, { buf::NONE }, { buf::OUTPUT }, 1, 1, 0, false, true, false>(-1, out_ix, n) }
    }

    /// Direct [`Primitives::recv_copy_send`]: forwards from this rank's output straight
    /// into the next rank's.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn direct_recv_copy_send(&mut self, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1 && F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, this rank's and the next rank's
        // outputs hold `out_ix..out_ix + n` (every rank's output has the same layout), and `n`
        // is at most one chunk; the operand counts are the ones `generic_op` asserts for these
        // roles.
        unsafe { self.generic_op::<true, true, { buf::NONE }, { buf::OUTPUT }, 1, 2, 0, false, true, true>(-1, out_ix, n) }
    }

    /// [`Primitives::recv_reduce_copy_send`] whose result goes straight into the next
    /// rank's output (the received partial comes through the FIFO).
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn direct_recv_reduce_copy_send(&mut self, in_ix: i64, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1 && F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, the input holds `in_ix..in_ix +
        // n`, this rank's and the next rank's outputs `out_ix..out_ix + n` (every rank's output
        // has the same layout), and `n` is at most one chunk; the operand counts are the ones
        // `generic_op` asserts for these roles.
        unsafe { self.generic_op::<true, true, { buf::INPUT }, { buf::OUTPUT }, 2, 2, 1, true, false, true>(in_ix, out_ix, n) }
    }

    /// NCCL's `directRecvDirectSend`: receives `n` elements and sends them on, applying the
    /// operator's post-op, touching no user buffer. NVLS all-reduce's reduce group runs it
    /// with a multicast slot on both sides (`MULTIMEM_SRCS = MULTIMEM_DSTS = 1`): every
    /// rank's scattered block is load-reduced and the result stored to every rank. Without
    /// registered user buffers (ferroccl registers none for NVLS) it moves FIFO slot to
    /// FIFO slot, as NCCL does when `regUsed` is 0; `in_ix` and `out_ix` only place a
    /// direct operation's pointers when direct operations are on.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn direct_recv_direct_send(&mut self, in_ix: i64, out_ix: i64, n: i64) {
        const { assert!(F::MAX_RECV >= 1 && F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `generic_op`'s: every
        // thread of the group calls it with the same arguments, no user buffer is touched
        // unless direct operations are on (then both outputs hold `out_ix..out_ix + n`), and
        // `n` is at most one chunk; the operand counts are the ones `generic_op` asserts for
        // these roles.
        unsafe { self.generic_op::<true, true, { buf::NONE }, { buf::NONE }, 1, 1, 0, true, true, true>(in_ix, out_ix, n) }
    }

    /// Sends each send peer `i` its block of `peer_elem` input elements, at `in_ix + i ×
    /// peer_offset` (blocks from peer `skip` on shifted one block further), starting with
    /// peer `shift`; `total_elem` bounds the input.
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn scatter(&mut self, in_ix: i64, total_elem: i64, peer_elem: i64, peer_offset: i64, skip: i32, shift: u32) {
        const { assert!(F::MAX_SEND >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `scatter_gather_op`'s
        // (as `generic_op`'s): every thread of the group calls it with the same arguments, the
        // input holds every peer's block from `in_ix` (bounded by `total_elem`), and
        // `peer_elem` is at most one chunk.
        unsafe { self.scatter_gather_op::<false, true>(in_ix, total_elem, peer_elem, peer_offset, skip, shift) }
    }

    /// Receives from each receive peer `i` its block of `peer_elem` elements into the
    /// output at `out_ix + i × peer_offset` (as [`Primitives::scatter`]).
    ///
    /// # Safety
    /// As [`Primitives::send`].
    #[inline(never)]
    pub unsafe fn gather(&mut self, out_ix: i64, total_elem: i64, peer_elem: i64, peer_offset: i64, skip: i32, shift: u32) {
        const { assert!(F::MAX_RECV >= 1) };
        // SAFETY: this function's contract, which the caller keeps, is `scatter_gather_op`'s
        // (as `generic_op`'s): every thread of the group calls it with the same arguments, the
        // output holds every peer's block from `out_ix` (bounded by `total_elem`), and
        // `peer_elem` is at most one chunk.
        unsafe { self.scatter_gather_op::<true, false>(out_ix, total_elem, peer_elem, peer_offset, skip, shift) }
    }
}
