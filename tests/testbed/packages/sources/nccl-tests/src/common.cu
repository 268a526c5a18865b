// Simulated fleet: imitation nccl-tests driver code (sources/README.md).
#include "common.h"
