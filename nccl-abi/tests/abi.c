/* NCCL's ABI as a C program sees it, without a GPU: versions, error strings, unique ids,
 * argument and config checks, groups, operators ferroccl does not serve, and an init that
 * either builds a one-rank communicator (with a GPU) or reports the driver's absence.
 * Prints the first check that fails and exits 1; 0 when every check holds. */
#include <stdio.h>
#include <string.h>

#include "nccl.h"

static int failures = 0;

#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "line %d: ", __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, " (last error: %s)\n", ncclGetLastError(NULL)); \
      failures++;                                                 \
    }                                                             \
  } while (0)

static int said(const char* text) { return strstr(ncclGetLastError(NULL), text) != NULL; }

int main(void) {
  int version = 0;
  CHECK(ncclGetVersion(&version) == ncclSuccess && version == NCCL_VERSION_CODE, "version %d", version);
  CHECK(ncclGetVersion(NULL) == ncclInvalidArgument && said("version is NULL"), "a NULL version");

  CHECK(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0, "success's text");
  for (int r = 0; r < ncclNumResults; r++) CHECK(strlen(ncclGetErrorString((ncclResult_t)r)) > 0, "result %d has no text", r);
  CHECK(strcmp(ncclGetErrorString((ncclResult_t)99), "unknown result code") == 0, "an unknown result's text");

  ncclUniqueId a, b;
  CHECK(ncclGetUniqueId(&a) == ncclSuccess && ncclGetUniqueId(&b) == ncclSuccess, "unique ids");
  CHECK(memcmp(&a, &b, sizeof a) != 0, "two unique ids are the same");
  CHECK(ncclGetUniqueId(NULL) == ncclInvalidArgument, "a NULL unique id");

  ncclComm_t comm = NULL;
  CHECK(ncclCommInitRank(&comm, 0, a, 0) == ncclInvalidArgument && comm == NULL && said("nranks 0"), "0 ranks");
  CHECK(ncclCommInitRank(&comm, 2, a, 2) == ncclInvalidArgument && said("rank 2 of 2"), "rank 2 of 2");
  CHECK(ncclCommInitRank(&comm, 2, a, -1) == ncclInvalidArgument, "rank -1");
  CHECK(ncclCommInitRank(NULL, 1, a, 0) == ncclInvalidArgument && said("comm is NULL"), "a NULL comm");
  ncclUniqueId junk;
  memset(&junk, 7, sizeof junk);
  CHECK(ncclCommInitRank(&comm, 1, junk, 0) == ncclInvalidArgument && said("no ferroccl communicator id"), "an id ncclGetUniqueId did not make");

  CHECK(ncclCommInitRankScalable(&comm, 1, 0, 0, &a, NULL) == ncclInvalidArgument && said("nId 0"), "a scalable init without ids");
  CHECK(ncclCommInitRankScalable(&comm, 1, 0, 1, NULL, NULL) == ncclInvalidArgument && said("commIds is NULL"), "a scalable init with NULL ids");
  CHECK(ncclCommInitRankScalable(&comm, 2, 2, 1, &a, NULL) == ncclInvalidArgument && said("rank 2 of 2"), "a scalable init of rank 2 of 2");

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  CHECK(ncclCommInitRankConfig(&comm, 1, a, 0, &config) == ncclInvalidArgument && said("magic"), "a config without its magic");
  ncclConfig_t small = NCCL_CONFIG_INITIALIZER;
  small.size = 8;
  CHECK(ncclCommInitRankConfig(&comm, 1, a, 0, &small) == ncclInvalidArgument && said("8 bytes"), "a config too small");
  ncclConfig_t no_ctas = NCCL_CONFIG_INITIALIZER;
  no_ctas.maxCTAs = 0;
  CHECK(ncclCommInitRankConfig(&comm, 1, a, 0, &no_ctas) == ncclInvalidArgument && said("maxCTAs 0"), "maxCTAs 0");

  int count = 0;
  CHECK(ncclAllReduce(NULL, NULL, 1, ncclFloat, ncclSum, NULL, NULL) == ncclInvalidArgument && said("ncclAllReduce: comm is NULL"), "an all-reduce on no communicator");
  CHECK(ncclSend(NULL, 1, ncclFloat, 0, NULL, NULL) == ncclInvalidArgument, "a send on no communicator");
  CHECK(ncclGather(NULL, NULL, 1, ncclFloat, 0, NULL, NULL) == ncclInvalidArgument && said("ncclGather: comm is NULL"), "a gather on no communicator");
  CHECK(ncclScatter(NULL, NULL, 1, ncclFloat, 0, NULL, NULL) == ncclInvalidArgument && said("ncclScatter: comm is NULL"), "a scatter on no communicator");
  CHECK(ncclAlltoAll(NULL, NULL, 1, ncclFloat, NULL, NULL) == ncclInvalidArgument && said("ncclAlltoAll: comm is NULL"), "an all-to-all on no communicator");
  CHECK(ncclCommCount(NULL, &count) == ncclInvalidArgument, "the count of no communicator");
  CHECK(ncclCommDestroy(NULL) == ncclInvalidArgument, "destroying no communicator");

  CHECK(ncclGroupEnd() == ncclInvalidUsage && said("without ncclGroupStart"), "a group end without a start");
  CHECK(ncclGroupStart() == ncclSuccess && ncclGroupStart() == ncclSuccess, "group starts");
  CHECK(ncclGroupEnd() == ncclSuccess && ncclGroupEnd() == ncclSuccess, "nested group ends");

  ncclRedOp_t op = ncclSum;
  float scalar = 2.0f;
  CHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat8e4m3, ncclScalarHostImmediate, NULL) == ncclInvalidUsage && said("FP8"), "an FP8 operator");
  CHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarDevice, NULL) == ncclInvalidUsage && said("ncclScalarDevice"), "a device scalar");
  CHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, NULL) == ncclInvalidArgument && said("comm is NULL"), "an operator of no communicator");

  /* A valid one-rank init: a communicator where a GPU is, the driver's absence otherwise. */
  ncclResult_t init = ncclCommInitRank(&comm, 1, a, 0);
  if (init == ncclSuccess) {
    CHECK(ncclCommCount(comm, &count) == ncclSuccess && count == 1, "one rank: count %d", count);
    CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroying the one rank");
  } else {
    CHECK(init == ncclUnhandledCudaError && said("driver"), "a one-rank init without a GPU returned %d", (int)init);
  }

  if (failures == 0) printf("every ABI check held\n");
  return failures == 0 ? 0 : 1;
}
