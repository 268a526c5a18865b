// Simulated fleet: imitation nvbandwidth version header (sources/README.md).
#define NVBANDWIDTH_VERSION "v@VERSION@"
