// Simulated fleet: imitation of nccl-tests' all_reduce test (sources/README.md).
#include "common.h"
// stand-in-program: all_reduce_perf @VERSION@
