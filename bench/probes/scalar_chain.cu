// What one thread's dependent scalar work costs on the GPU (bench/probes/README.md): the
// cost model behind the call kernel's fixed time (bench/NOTES.md, call kernel). One CTA of 32
// threads, thread 0 timed with %globaltimer and clock64 around chains of N dependent
// operations, each chain repeated and the median taken:
//   1. 32-bit integer add/xor/shift steps (the plans' arithmetic),
//   2. 64-bit integer division by a runtime value (what `div_narrow` avoids),
//   3. 32-bit integer division by a runtime value,
//   4. a pointer chase through global memory that stays in L1 (a 4 KiB ring, warm),
//   5. the same through 64 MiB (L2 misses at random, the cold-field case),
//   6. a branchy chain: a data-dependent switch over 8 cases each step,
//   7. a non-inlined call per step (the ABI's save/restore).
// Build: nvcc -O3 -arch=sm_90a scalar_chain.cu -o scalar_chain
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

__device__ __forceinline__ uint64_t gtime() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __noinline__ uint32_t step_call(uint32_t x, uint32_t k) { return (x ^ k) + (x >> 3); }

// out[0] = ns, out[1] = cycles, out[2] = result (kept live).
__global__ void chain(int kind, uint32_t n, uint64_t divisor, const uint64_t* ring, uint64_t* out) {
  if (threadIdx.x != 0) return;
  uint64_t x = divisor + 12345;
  uint32_t y = static_cast<uint32_t>(divisor) + 777;
  uint64_t p = 0;
  uint64_t t0 = gtime();
  long long c0 = clock64();
  switch (kind) {
    case 1:
      for (uint32_t i = 0; i < n; ++i) y = ((y ^ i) + (y >> 3)) | 1;
      x = y;
      break;
    case 2:
      for (uint32_t i = 0; i < n; ++i) x = x / divisor + (x << 20) + i;
      break;
    case 3:
      for (uint32_t i = 0; i < n; ++i) y = y / static_cast<uint32_t>(divisor) + (y << 10) + i;
      x = y;
      break;
    case 4:
    case 5:
      for (uint32_t i = 0; i < n; ++i) p = ring[p];
      x = p;
      break;
    case 6:
      for (uint32_t i = 0; i < n; ++i) {
        switch ((y ^ i) & 7) {
          case 0: y = y * 3 + 1; break;
          case 1: y = y ^ 0x55; break;
          case 2: y = y + (y >> 5); break;
          case 3: y = y - 7; break;
          case 4: y = (y << 1) | 1; break;
          case 5: y = y ^ (y >> 7); break;
          case 6: y = y + 13; break;
          default: y = ~y; break;
        }
      }
      x = y;
      break;
    case 7:
      for (uint32_t i = 0; i < n; ++i) y = step_call(y, i);
      x = y;
      break;
  }
  long long c1 = clock64();
  uint64_t t1 = gtime();
  out[0] = t1 - t0;
  out[1] = static_cast<uint64_t>(c1 - c0);
  out[2] = x;
}

int main() {
  const uint32_t n = 4096;
  const int reps = 21;
  uint64_t* out;
  CHECK(cudaMalloc(&out, 3 * sizeof(uint64_t)));
  // Rings: a 4 KiB one (512 slots, stride 17) and a 64 MiB one (random permutation cycle).
  const size_t small = 512, large = (64u << 20) / 8;
  std::vector<uint64_t> hs(small), hl(large), perm(large);
  for (size_t i = 0; i < small; ++i) hs[i] = (i + 17) % small;
  for (size_t i = 0; i < large; ++i) perm[i] = i;
  uint64_t s = 88172645463325252ull;
  for (size_t i = large - 1; i > 0; --i) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    std::swap(perm[i], perm[s % (i + 1)]);
  }
  for (size_t i = 0; i < large; ++i) hl[perm[i]] = perm[(i + 1) % large];
  uint64_t *ds, *dl;
  CHECK(cudaMalloc(&ds, small * 8));
  CHECK(cudaMalloc(&dl, large * 8));
  CHECK(cudaMemcpy(ds, hs.data(), small * 8, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dl, hl.data(), large * 8, cudaMemcpyHostToDevice));
  const char* names[] = {"", "u32 add/xor/shift step", "u64 division by a runtime value", "u32 division by a runtime value",
                         "global load, L1-resident chase", "global load, 64 MiB random chase", "8-way data-dependent switch step",
                         "non-inlined call step"};
  std::printf("# one thread, chains of %u dependent steps, median of %d launches\n", n, reps);
  std::printf("# %-36s %10s %10s %10s\n", "step", "ns/step", "cyc/step", "steps/us");
  for (int kind = 1; kind <= 7; ++kind) {
    std::vector<double> ns, cyc;
    for (int r = 0; r < reps; ++r) {
      chain<<<1, 32>>>(kind, n, 1000003ull, kind == 5 ? dl : ds, out);
      CHECK(cudaGetLastError());
      uint64_t h[3];
      CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
      ns.push_back(static_cast<double>(h[0]) / n);
      cyc.push_back(static_cast<double>(h[1]) / n);
    }
    std::sort(ns.begin(), ns.end());
    std::sort(cyc.begin(), cyc.end());
    double m = ns[reps / 2], c = cyc[reps / 2];
    std::printf("  %-36s %10.2f %10.1f %10.0f\n", names[kind], m, c, 1e3 / m);
  }
  return 0;
}
