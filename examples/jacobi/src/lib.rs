//! [NVSHMEM](https://docs.nvidia.com/nvshmem/api/)'s Jacobi example, host side: the
//! problem's constants, the host reference of one step, and the error line as the example
//! prints it. The program is `src/main.rs`; the device code is `ferroccl-jacobi-device`.

/// Points of the whole domain, over all PEs.
pub const NUM_POINTS: usize = 4_194_304;
/// The fixed temperatures at the left and right ends.
pub const T_LEFT: f32 = 5.0;
pub const T_RIGHT: f32 = 10.0;
/// The solver stops once the error is at most this.
pub const TOLERANCE: f32 = 1e-4;
/// ... or after this many iterations.
pub const MAX_ITERS: u32 = 1000;

/// The error of a step whose squared changes sum to `l2` over `points` points: 1 for
/// the first step of a domain that did not change, else `sqrt(l2 / points)` (the example's
/// rule, in f32).
pub fn error_of(l2: f32, points: usize) -> f32 {
    if l2 == 0.0 { 1.0 } else { (l2 / points as f32).sqrt() }
}

/// `v` as C++'s `std::cout << v` prints a float (`%g`, 6 significant digits): fixed
/// notation for decimal exponents −5 to 5, else scientific, trailing zeros dropped.
pub fn format_g(v: f32) -> String {
    let v = f64::from(v);
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let exponent = format!("{v:.5e}").split('e').nth(1).and_then(|e| e.parse::<i32>().ok()).unwrap_or(0);
    let trim = |s: String| if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if (-5..6).contains(&exponent) {
        trim(format!("{v:.*}", (5 - exponent) as usize))
    } else {
        let s = format!("{v:.5e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!("{}e{}{:02}", trim(mantissa.to_string()), if e < 0 { '-' } else { '+' }, e.abs())
    }
}

/// One Jacobi step of the whole domain on the host, in f32 as the device computes each
/// point: `new[i] = 0.5 · (old[i+1] + old[i−1])` for every inner point, the two ends
/// fixed. Returns the new domain and every point's squared change (0 at the ends).
pub fn reference_step(old: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut new = old.to_vec();
    let mut changes = vec![0.0f32; old.len()];
    for i in 1..old.len().saturating_sub(1) {
        new[i] = 0.5 * (old[i + 1] + old[i - 1]);
        changes[i] = (new[i] - old[i]) * (new[i] - old[i]);
    }
    (new, changes)
}

/// The initial domain of `points` points: `T_LEFT`, zeros, `T_RIGHT`.
pub fn initial_domain(points: usize) -> Vec<f32> {
    let mut f = vec![0.0f32; points];
    f[0] = T_LEFT;
    f[points - 1] = T_RIGHT;
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_cout_prints_them() {
        assert_eq!(format_g(0.002_729_58), "0.00272958");
        assert_eq!(format_g(0.000_107_83), "0.00010783");
        assert_eq!(format_g(1.0), "1");
        assert_eq!(format_g(0.5), "0.5");
        assert_eq!(format_g(123_456.7), "123457");
        assert_eq!(format_g(1_234_567.0), "1.23457e+06");
        assert_eq!(format_g(0.000_001_5), "1.5e-06");
    }

    /// The host reference reproduces the table NVSHMEM's example prints: only points within
    /// `i` of the ends change in the first `i` steps, so a domain of 4096 points gives the
    /// same squared changes as the example's 4194304, normalised by its point count.
    #[test]
    fn the_reference_prints_the_seeds_error_table() {
        let seed = ["0.00272958", "0.00034546", "0.000210903", "0.000157015", "0.000127122", "0.00010783"];
        let mut f = initial_domain(4096);
        let mut printed = Vec::new();
        let mut iteration = 0;
        loop {
            let (new, changes) = reference_step(&f);
            f = new;
            let error = error_of(changes.iter().sum(), NUM_POINTS);
            if iteration % 10 == 0 {
                printed.push(format_g(error));
            }
            iteration += 1;
            if error <= TOLERANCE || iteration >= MAX_ITERS {
                break;
            }
        }
        assert_eq!(printed, seed);
        assert!(iteration < MAX_ITERS, "converged: Success!");
    }
}
