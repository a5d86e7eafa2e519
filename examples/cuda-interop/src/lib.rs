//! The cuda-interop example's inputs and host reference, shared by the program
//! (`src/main.rs`, on GPUs) and the host-twin test.

/// PE `pe`'s input element `i`: small integers over 8, exact in f32 and in every sum.
pub fn input(pe: usize, i: usize) -> f32 {
    ((pe * 7 + i * 3) % 64) as f32 / 8.0
}

/// Bias element `i`.
pub fn bias(i: usize) -> f32 {
    (i % 5) as f32 - 2.0
}

/// What every PE's `sum` holds after `scale_all_reduce_bias` on `pes` PEs of `n`
/// elements: each PE's input scaled, added in PE order, then the bias.
pub fn reference(pes: usize, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| (1..pes).fold(input(0, i) * scale, |s, pe| s + input(pe, i) * scale) + bias(i)).collect()
}
