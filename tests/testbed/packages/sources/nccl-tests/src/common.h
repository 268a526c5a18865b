// Simulated fleet: imitation nccl-tests header (sources/README.md).
#include <nccl.h>
#include <cuda_runtime.h>
