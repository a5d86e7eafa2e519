// The probes' check of a CUDA, driver or library call: any status but 0 prints the call,
// where it is and the status, and ends the program.
#pragma once
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                        \
  do {                                                                               \
    auto r_ = (x);                                                                   \
    if (r_ != 0) {                                                                   \
      fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)r_);         \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)
