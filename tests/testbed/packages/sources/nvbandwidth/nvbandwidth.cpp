// Simulated fleet: imitation nvbandwidth main program (sources/README.md).
#include <boost/program_options.hpp>
#include <cuda.h>
#include <nvml.h>
#include "version.h"
// stand-in-program: nvbandwidth v@VERSION@
