# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What the gather runs for the performance gates of readiness (rules/_perf_gates.py): the argv of ``all_reduce_perf``
(NVIDIA/nccl-tests) and ``nvbandwidth`` (NVIDIA/nvbandwidth).  The parsers of their outputs, which only the controller
needs, are parsers/_nccl_tests.py and parsers/_nvbandwidth.py.  Pure; Python 3.6 compatible.

``all_reduce_perf -b 1G -e 16G -f 2 -g <GPUs> -c 1``: one process over every GPU of the node (the perf_tools role
builds nccl-tests with MPI=0; ``-g`` is the GPUs per thread), message sizes 1, 2, 4, 8 and 16 GiB (``-f 2``: each size
twice the last; ``G`` is GiB: the a3mega capture of tests/fixtures/nccl-tests ran ``-e 8G`` to 8589934592 bytes), the
data check on (``-c 1``: ``#wrong`` and the out-of-bounds count are real).  Every range a published figure was taken over lies inside it (Azure's
check_nccl_allreduce: one size, 16 GiB or 8 GiB; OCI's run_local_nccl_test: 1 GiB to 16 GiB).
``nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce``: the three
copy-engine cases of Azure's check_gpu_bw (``-t`` takes several names: nvbandwidth.cpp, a multitoken option).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

GIB = 1024 ** 3
ALLREDUCE_MIN_BYTES = GIB
ALLREDUCE_MAX_BYTES = 16 * GIB
NVB_CASES = ('host_to_device_memcpy_ce', 'device_to_host_memcpy_ce', 'device_to_device_memcpy_read_ce')
TOOLS = ('all_reduce_perf', 'nvbandwidth')


def allreduce_argv(path, gpus):
    """all_reduce_perf over ``gpus`` GPUs in one process, 1 GiB to 16 GiB by factors of 2, data check on."""
    return [path, '-b', '1G', '-e', '16G', '-f', '2', '-g', str(int(gpus)), '-c', '1']


def nvbandwidth_argv(path):
    """nvbandwidth's three copy-engine cases, text output."""
    return [path, '-t'] + list(NVB_CASES)
