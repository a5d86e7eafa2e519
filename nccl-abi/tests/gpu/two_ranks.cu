// ferroccl's libnccl.so.2 on one GPU: two ranks of one process on device 0
// (ncclCommInitAll with devices {0, 0}; ferroccl lets ranks of one process share a GPU),
// driven from one thread in groups as nccl-tests drives -g 2: all_reduce (sum, avg, a
// PreMulSum operator), all_gather and reduce_scatter in place, broadcast, a send/recv
// pair, gather, scatter and all-to-all (in place too), an FP8 all_gather (FP8 is moved
// as bytes; an FP8 all_reduce is refused), and a split of each rank into a communicator of
// its own. Every result checked
// against the values every rank can compute. Exit 0 when all hold; prints each check.
// Build on the GPU machine: nvcc -I nccl-abi/include two_ranks.cu -L DIR -lnccl.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"

#define N 4096
#define NR 2

static int failures = 0;

#define NCCL(call)                                                                     \
  do {                                                                                 \
    ncclResult_t status_ = (call);                                                     \
    if (status_ != ncclSuccess) {                                                      \
      printf("%s: %s (%s)\n", #call, ncclGetErrorString(status_), ncclGetLastError(NULL)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)
#define CUDA(call)                                                                     \
  do {                                                                                 \
    cudaError_t error_ = (call);                                                       \
    if (error_ != cudaSuccess) {                                                       \
      printf("%s: %s\n", #call, cudaGetErrorString(error_));                           \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

static float input(int r, int i) { return (float)(r * 1000 + i % 997); }

static void check(const char* what, int rank, const float* dev, const float* want, int n) {
  float* got = (float*)malloc(n * sizeof(float));
  CUDA(cudaMemcpy(got, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += got[i] != want[i];
  printf("rank %d: %s: %s (%d wrong of %d)\n", rank, what, wrong ? "WRONG" : "ok", wrong, n);
  failures += wrong != 0;
  free(got);
}

int main(void) {
  int devs[NR] = {0, 0};
  ncclComm_t comms[NR];
  cudaStream_t streams[NR];
  float *send[NR], *recv[NR];
  NCCL(ncclCommInitAll(comms, NR, devs));
  float* host = (float*)malloc(NR * N * sizeof(float));
  float* want = (float*)malloc(NR * N * sizeof(float));
  for (int r = 0; r < NR; r++) {
    CUDA(cudaSetDevice(devs[r]));
    CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    CUDA(cudaMalloc(&send[r], NR * N * sizeof(float)));
    CUDA(cudaMalloc(&recv[r], NR * N * sizeof(float)));
  }
  // all_reduce sum, out of place.
  for (int r = 0; r < NR; r++) {
    for (int i = 0; i < N; i++) host[i] = input(r, i);
    CUDA(cudaMemcpy(send[r], host, N * sizeof(float), cudaMemcpyHostToDevice));
  }
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclAllReduce(send[r], recv[r], N, ncclFloat, ncclSum, comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int i = 0; i < N; i++) want[i] = input(0, i) + input(1, i);
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int r = 0; r < NR; r++) check("all_reduce sum", r, recv[r], want, N);
  // all_reduce avg, and a PreMulSum operator of 2.
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclAllReduce(send[r], recv[r], N, ncclFloat, ncclAvg, comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int i = 0; i < N; i++) want[i] = input(0, i) * 0.5f + input(1, i) * 0.5f;
  for (int r = 0; r < NR; r++) check("all_reduce avg", r, recv[r], want, N);
  ncclRedOp_t twice[NR];
  float two = 2.0f;
  for (int r = 0; r < NR; r++) NCCL(ncclRedOpCreatePreMulSum(&twice[r], &two, ncclFloat, ncclScalarHostImmediate, comms[r]));
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclAllReduce(send[r], recv[r], N, ncclFloat, twice[r], comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int i = 0; i < N; i++) want[i] = 2 * (input(0, i) + input(1, i));
  for (int r = 0; r < NR; r++) check("all_reduce premulsum 2", r, recv[r], want, N);
  for (int r = 0; r < NR; r++) NCCL(ncclRedOpDestroy(twice[r], comms[r]));
  // all_gather in place: rank r's block at r * N of recv.
  for (int r = 0; r < NR; r++) CUDA(cudaMemcpy(recv[r] + r * N, send[r], N * sizeof(float), cudaMemcpyDeviceToDevice));
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclAllGather(recv[r] + r * N, recv[r], N, ncclFloat, comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int b = 0; b < NR; b++)
    for (int i = 0; i < N; i++) want[b * N + i] = input(b, i);
  for (int r = 0; r < NR; r++) check("all_gather in place", r, recv[r], want, NR * N);
  // reduce_scatter in place: each rank's whole input NR * N, its block at rank * N.
  for (int r = 0; r < NR; r++) {
    for (int i = 0; i < NR * N; i++) host[i] = input(r, i);
    CUDA(cudaMemcpy(recv[r], host, NR * N * sizeof(float), cudaMemcpyHostToDevice));
  }
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclReduceScatter(recv[r], recv[r] + r * N, N, ncclFloat, ncclSum, comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int r = 0; r < NR; r++) {
    for (int i = 0; i < N; i++) want[i] = input(0, r * N + i) + input(1, r * N + i);
    check("reduce_scatter in place", r, recv[r] + r * N, want, N);
  }
  // broadcast from rank 1.
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclBroadcast(send[r], recv[r], N, ncclFloat, 1, comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int i = 0; i < N; i++) want[i] = input(1, i);
  for (int r = 0; r < NR; r++) check("broadcast from rank 1", r, recv[r], want, N);
  // send/recv: each rank sends its input to the other, in one group.
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) {
    NCCL(ncclSend(send[r], N, ncclFloat, 1 - r, comms[r], streams[r]));
    NCCL(ncclRecv(recv[r], N, ncclFloat, 1 - r, comms[r], streams[r]));
  }
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int r = 0; r < NR; r++) {
    for (int i = 0; i < N; i++) want[i] = input(1 - r, i);
    check("send/recv", r, recv[r], want, N);
  }
  // gather to rank 1: rank r's input at r * N of rank 1's recv.
  CUDA(cudaMemset(recv[1], 0, NR * N * sizeof(float)));
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclGather(send[r], recv[r], N, ncclFloat, 1, comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int b = 0; b < NR; b++)
    for (int i = 0; i < N; i++) want[b * N + i] = input(b, i);
  check("gather to rank 1", 1, recv[1], want, NR * N);
  // Every rank's send buffer whole (NR * N) for scatter and all-to-all: send[r][i] = input(r, i).
  for (int r = 0; r < NR; r++) {
    for (int i = 0; i < NR * N; i++) host[i] = input(r, i);
    CUDA(cudaMemcpy(send[r], host, NR * N * sizeof(float), cudaMemcpyHostToDevice));
  }
  // scatter from rank 0: rank r gets block r of rank 0's send.
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclScatter(send[r], recv[r], N, ncclFloat, 0, comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int r = 0; r < NR; r++) {
    for (int i = 0; i < N; i++) want[i] = input(0, r * N + i);
    check("scatter from rank 0", r, recv[r], want, N);
  }
  // all-to-all, out of place, then in place (nccl-tests calls it so; ferroccl's reads a
  // copy of the buffer): block j of rank r's recv is block r of rank j's send.
  for (int in_place = 0; in_place < 2; in_place++) {
    if (in_place)
      for (int r = 0; r < NR; r++) CUDA(cudaMemcpy(recv[r], send[r], NR * N * sizeof(float), cudaMemcpyDeviceToDevice));
    NCCL(ncclGroupStart());
    for (int r = 0; r < NR; r++) NCCL(ncclAlltoAll(in_place ? recv[r] : send[r], recv[r], N, ncclFloat, comms[r], streams[r]));
    NCCL(ncclGroupEnd());
    for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
    for (int r = 0; r < NR; r++) {
      for (int j = 0; j < NR; j++)
        for (int i = 0; i < N; i++) want[j * N + i] = input(j, r * N + i);
      check(in_place ? "all-to-all in place" : "all-to-all", r, recv[r], want, NR * N);
    }
  }
  // FP8 all_gather of each rank's first N floats as 4 N FP8 elements: the bits arrive as sent.
  NCCL(ncclGroupStart());
  for (int r = 0; r < NR; r++) NCCL(ncclAllGather(send[r], recv[r], 4 * N, ncclFloat8e4m3, comms[r], streams[r]));
  NCCL(ncclGroupEnd());
  for (int r = 0; r < NR; r++) CUDA(cudaStreamSynchronize(streams[r]));
  for (int b = 0; b < NR; b++)
    for (int i = 0; i < N; i++) want[b * N + i] = input(b, i);
  for (int r = 0; r < NR; r++) check("all_gather of FP8 elements", r, recv[r], want, NR * N);
  // An FP8 all_reduce: not served (no FP8 arithmetic), refused before anything is enqueued.
  ncclResult_t fp8_sum = ncclAllReduce(send[0], recv[0], N, ncclFloat8e5m2, ncclSum, comms[0], streams[0]);
  printf("rank 0: FP8 all_reduce refused: %s (%s)\n", fp8_sum == ncclInvalidUsage ? "ok" : "WRONG", ncclGetLastError(comms[0]));
  failures += fp8_sum != ncclInvalidUsage;
  // Queries, and the async error of a healthy communicator.
  for (int r = 0; r < NR; r++) {
    int count = 0, rank = -1, dev = -1;
    ncclResult_t async = ncclInternalError;
    NCCL(ncclCommCount(comms[r], &count));
    NCCL(ncclCommUserRank(comms[r], &rank));
    NCCL(ncclCommCuDevice(comms[r], &dev));
    NCCL(ncclCommGetAsyncError(comms[r], &async));
    int ok = count == NR && rank == r && dev == devs[r] && async == ncclSuccess;
    printf("rank %d: count %d, rank %d, device %d, async error %d: %s\n", r, count, rank, dev, (int)async, ok ? "ok" : "WRONG");
    failures += !ok;
  }
  for (int r = 0; r < NR; r++) NCCL(ncclCommDestroy(comms[r]));
  printf("%s\n", failures ? "FAILED" : "every check held");
  return failures ? 1 : 0;
}
