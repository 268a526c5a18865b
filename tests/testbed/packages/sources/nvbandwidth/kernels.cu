// Simulated fleet: imitation nvbandwidth copy kernels (sources/README.md).
#include <cuda.h>
#include <cuda_runtime_api.h>
