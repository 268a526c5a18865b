# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The figures a GPU node's fitness is judged by, per GPU model, each with its public source: the one home of these
numbers (docs/readiness-thresholds.md is the table a person reads; tests/unit/.../test__fitness_thresholds.py checks
the two agree).  Pure data and lookups; no Ansible import; Python 3.6 and later.

A figure is a *threshold* only where a public health check fails a node below (or above) it; measured values
published as benchmarks are kept apart as ``reference`` and are never used to judge.  Where no public threshold was
found the value is None and the check that needs it must skip, naming the setting that supplies one (see
:func:`thresholds`).  Every figure names its source by a key of ``SOURCES``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import re

GIB = 1024 ** 3

SOURCES = {
    'azure-nhc': (
        'Azure/azurehpc-health-checks at 0e0a1ac26a64b32ac4dd7632a529638505d3314a: conf/<VM size>.conf (the figures '
        'per VM size) and customTests/azure_nccl_allreduce.nhc (all_reduce_perf -b <size> -e <size> -f 2 -g 1 -c 1, '
        'one MPI rank per GPU, "Avg bus bandwidth" against the figure), customTests/azure_gpu_bandwidth.nhc '
        '(nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce -i 10: every '
        'cell of the matrix against the figure), customTests/azure_gpu_ecc.nhc (remapped rows), '
        'customTests/azure_gpu_clock_throttling.nhc, customTests/azure_gpu_nvlink.nhc, customTests/azure_gpu_vbios.nhc'),
    'oci-hpc': (
        'oracle-quickstart/oci-hpc at b5285a68fa0a3b39ebf9e7ffdcb4987018bbf3cf: '
        'playbooks/roles/healthchecks/files/active_healthcheck.py (run_local_nccl_test: all_reduce_perf -b 1G -e 16G '
        '-g 1 -n 50 -f 2 over 8 ranks on one node, "Avg bus bandwidth" against the figure) and check_gpu_setup.py '
        '(get_nvlink_speed: links and GB/s per link from nvidia-smi nvlink -s; check_row_remap_errors; check_gpu_pcie)'),
    'dcgm-health': (
        'NVIDIA/DCGM at 72fa3feaa67d716a75323a8f47c34ff3ee73f824: common/DcgmGPUHardwareLimits.h '
        '(DCGM_LIMIT_MAX_NVLINK_ERROR 1, DCGM_LIMIT_MAX_NVLINK_CRC_ERROR 100.0 per second, '
        'DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE 512) and modules/health/DcgmHealthWatch.cpp (replay and recovery '
        'errors fail when they grow; the PCIe replay rate allowed per lane and generation)'),
    'nvidia-smi-help': (
        'nvidia-smi --help-query-gpu (tests/fixtures/../shared copy: netdata/go.d.plugin '
        'modules/nvidia_smi/testdata/help-query-gpu.txt at 6d84f8b8ed696879226cb8bcfe154898f57e323f): '
        '"pcie.link.gen.current ... These may be reduced when the GPU is not in use", HW Slowdown "reducing the core '
        'clocks by a factor of 2 or more", SW Power Cap "can be changed with nvidia-smi --power-limit="'),
    'nvidia-mem-error-mgmt': (
        'NVIDIA GPU Memory Error Management, "Error Recovery and Response Flags" '
        '(docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt): the row-remapping pending flag means the remap happens at '
        'the next GPU reset; a row-remapping failure is an RMA condition'),
    'captures': (
        'tests/fixtures/SOURCES.md: nvlink -s captures (H100 SXM 18 x 26.562 GB/s, A100 SXM4 12 x 25 GB/s, an '
        'NVLink-bridged H100 PCIe pair with 6 of 18 links inactive by design) and nvidia-smi -q -x captures (idle '
        'GPUs at PCIe generation 1 with the full width; an L40S slot wired x8; H100, B200, GB200, GB300 at their full '
        'generation and x16), and the H200 capture bundle of utkuozdemir/nvidia_gpu_exporter (590.48.01, '
        'internal/captures/linux-x86_64__nvidia-h200__590.48.01.txt: Gen 5, 16x)'),
    'k8s-test-infra-371': ('NVIDIA/k8s-test-infra issue #371: nvidia-smi nvlink -s on a GB200 tray, links 0-17 at '
                           '53.125 GB/s'),
    'topology': ('nvidia-smi topo -m captures of tests/fixtures/topo and tests/fixtures/SOURCES.md (NV12 A100, NV18 '
                 'H100/H200/B200/B300/GB200; H20 NV18: vllm-project/vllm#5001)'),
    'nv8': ('nvidia-smi topo -m of 8 x NVIDIA H800 with NV8 between every pair (sgl-project/sglang#28424, '
            'tests/fixtures/topo) and NVIDIA\'s A800 40GB/80GB and H800 product briefs and datasheets: NVLink '
            '400 GB/s per GPU against 600 GB/s on A100 (12 links) and 900 GB/s on H100 (18 links), i.e. 8 links of '
            '50 GB/s'),
    'dgx1-v100': ('NVIDIA DGX-1 with Tesla V100 System Architecture white paper (WP-08437-002): 8 V100 SXM2 in a '
                  'hybrid cube-mesh, 6 NVLinks per GPU, no NVSwitch; nvidia-smi topo -m of such a board '
                  '(pytorch/pytorch benchmarks/distributed/ddp/README.md, tests/fixtures/topo): pairs at NV1 or NV2, '
                  'three peers per GPU at SYS, the links of each GPU adding up to 6'),
    'azure-benchmarks': (
        'Azure/AI-benchmarking-guide Azure_Results/ND_H100_v5_results.md, ND_H200_v5_results.md, '
        'ND_A100_v4_results.md (8fd0c6e1bd0f853ef8f0500a3640a7d80a2a92ef) and ND_GB200_v6_results.md '
        '(2a370be6de9586d365feed77e014a73f25198f4d): measured all-reduce bus bandwidth at 8 GB (in place) and '
        'nvbandwidth host->device, device->host, device<->device read. Measurements, not thresholds'),
}


def _allreduce(busbw, min_bytes, max_bytes, source, note=''):
    return {'busbw_gbps': busbw, 'min_bytes': min_bytes, 'max_bytes': max_bytes, 'source': source, 'note': note}


# One entry per GPU model, first match on nvidia-smi's product_name wins (PCIe and NVL cards are not HGX boards: their
# NVLink is a bridge between two cards, and none of these figures applies to them).
#   nvlinks          NVLinks per GPU on the board (nvidia-smi nvlink -s)
#   nvlink_gbps_min  the lowest speed nvlink -s may print for an active link (GB/s; oci-hpc get_nvlink_speed)
#   nvlink_gbps_seen what public nvlink -s captures print (GB/s; SOURCES 'captures', 'k8s-test-infra-371')
#   pcie             the PCIe link each GPU trains at under load: generation and width
#   allreduce        the single-node all_reduce_perf gate: "Avg bus bandwidth" (GB/s) of a run from min_bytes to
#                    max_bytes; other published figures of other run shapes in allreduce_other
#   nvbandwidth      the lowest cell allowed per nvbandwidth test case (GB/s)
#   reference        published measurements (never a threshold)
MODELS = (
    {'key': 'h100-sxm', 'label': 'H100 SXM5 (HGX H100)',
     'match': r'\bH100 80GB HBM3\b|\bH100[- ]SXM', 'exclude': r'PCIe|NVL',
     'nvlinks': 18, 'nvlinks_source': 'oci-hpc', 'nvlink_gbps_min': 25.0, 'nvlink_gbps_seen': 26.562,
     'pcie': {'gen': 5, 'width': 16, 'source': 'captures'},
     'allreduce': _allreduce(460.0, 16 * GIB, 16 * GIB, 'azure-nhc',
                             'Standard_ND96isr_H100_v5 and ND96is_H100_v5: check_nccl_allreduce 460.0 1 16G'),
     'allreduce_other': (_allreduce(440.0, GIB, 16 * GIB, 'oci-hpc', 'BM.GPU.H100.8'),),
     'nvbandwidth': {'host_to_device_memcpy_ce': 48.0, 'device_to_host_memcpy_ce': 48.0,
                     'device_to_device_memcpy_read_ce': 335.0, 'source': 'azure-nhc',
                     'note': 'check_gpu_bw 48 335 (ND H100 v5)'},
     'reference': {'allreduce_busbw_8gib': 478.87, 'nvbandwidth': {'host_to_device': 51.0, 'device_to_host': 52.0,
                                                                   'device_to_device_read': 672.0},
                   'source': 'azure-benchmarks'}},
    {'key': 'h200', 'label': 'H200 SXM (HGX H200)', 'match': r'\bH200\b', 'exclude': r'\bNVL\b|PCIe',
     'nvlinks': 18, 'nvlinks_source': 'oci-hpc', 'nvlink_gbps_min': 25.0, 'nvlink_gbps_seen': None,
     'pcie': {'gen': 5, 'width': 16, 'source': 'captures'},
     'allreduce': _allreduce(431.0, 16 * GIB, 16 * GIB, 'azure-nhc',
                             'Standard_ND96isr_H200_v5: check_nccl_allreduce 431.0 1 16G (ND96isrf_H200_v5: 432.0)'),
     'allreduce_other': (_allreduce(432.0, 16 * GIB, 16 * GIB, 'azure-nhc', 'ND96isrf_H200_v5'),
                         _allreduce(440.0, GIB, 16 * GIB, 'oci-hpc', 'BM.GPU.H200.8')),
     'nvbandwidth': {'host_to_device_memcpy_ce': 48.0, 'device_to_host_memcpy_ce': 48.0,
                     'device_to_device_memcpy_read_ce': 335.0, 'source': 'azure-nhc',
                     'note': 'check_gpu_bw 48 335 (ND H200 v5)'},
     'reference': {'allreduce_busbw_8gib': 479.98, 'nvbandwidth': {'host_to_device': 52.0, 'device_to_host': 52.0,
                                                                   'device_to_device_read': 671.0},
                   'source': 'azure-benchmarks'}},
    {'key': 'b200', 'label': 'B200 (HGX B200)', 'match': r'\bB200\b', 'exclude': r'\bGB200\b',
     'nvlinks': 18, 'nvlinks_source': 'oci-hpc', 'nvlink_gbps_min': 50.0, 'nvlink_gbps_seen': None,
     'pcie': {'gen': 5, 'width': 16, 'source': 'captures'},
     'allreduce': _allreduce(440.0, GIB, 16 * GIB, 'oci-hpc', 'BM.GPU.B200.8 (run_local_nccl_test)'),
     'allreduce_other': (),
     'nvbandwidth': None,
     'reference': None},
    {'key': 'b300', 'label': 'B300 (HGX B300)', 'match': r'\bB300\b', 'exclude': r'\bGB300\b',
     'nvlinks': 18, 'nvlinks_source': 'oci-hpc', 'nvlink_gbps_min': 50.0, 'nvlink_gbps_seen': None,
     'pcie': None,
     'allreduce': _allreduce(800.0, GIB, 16 * GIB, 'oci-hpc', 'BM.GPU.B300.8 (run_local_nccl_test)'),
     'allreduce_other': (),
     'nvbandwidth': None,
     'reference': None},
    {'key': 'gb200', 'label': 'GB200 (NVL72 compute tray, 4 GPUs)', 'match': r'\bGB200\b', 'exclude': None,
     'nvlinks': 18, 'nvlinks_source': 'oci-hpc', 'nvlink_gbps_min': 50.0, 'nvlink_gbps_seen': 53.125,
     'pcie': {'gen': 5, 'width': 16, 'source': 'captures'},
     'allreduce': None,
     'allreduce_other': (),
     'nvbandwidth': None,
     'reference': {'allreduce_busbw_8gib': 679.61, 'nvbandwidth': {'host_to_device': 201.0, 'device_to_host': 193.0,
                                                                   'device_to_device_read': 1530.0},
                   'source': 'azure-benchmarks', 'note': 'one tray, 4 GPUs, Ring algorithm'}},
    {'key': 'gb300', 'label': 'GB300 (NVL72 compute tray, 4 GPUs)', 'match': r'\bGB300\b', 'exclude': None,
     'nvlinks': 18, 'nvlinks_source': 'oci-hpc', 'nvlink_gbps_min': 50.0, 'nvlink_gbps_seen': None,
     'pcie': {'gen': 6, 'width': 16, 'source': 'captures'},
     'allreduce': None,
     'allreduce_other': (),
     'nvbandwidth': None,
     'reference': None},
    {'key': 'a100-sxm4', 'label': 'A100 SXM4 (HGX A100)', 'match': r'\bA100-SXM', 'exclude': None,
     'nvlinks': 12, 'nvlinks_source': 'oci-hpc', 'nvlink_gbps_min': 25.0, 'nvlink_gbps_seen': 25.0,
     'pcie': {'gen': 4, 'width': 16, 'source': 'captures'},
     'allreduce': _allreduce(228.0, 16 * GIB, 16 * GIB, 'azure-nhc',
                             'Standard_ND96amsr_A100_v4: check_nccl_allreduce 228.0 1 16G (ND96asr_v4: 228.0 at 8G)'),
     'allreduce_other': (_allreduce(228.0, 8 * GIB, 8 * GIB, 'azure-nhc', 'ND96asr_v4 (A100 40GB)'),
                         _allreduce(185.0, GIB, 10 * GIB, 'oci-hpc', 'BM.GPU4.8 / BM.GPU.A100-v2.8')),
     'nvbandwidth': {'host_to_device_memcpy_ce': 21.0, 'device_to_host_memcpy_ce': 21.0,
                     'device_to_device_memcpy_read_ce': 238.0, 'source': 'azure-nhc',
                     'note': 'check_gpu_bw 21 238 (ND96amsr_A100_v4; ND96asr_v4: 21 235)'},
     'reference': {'allreduce_busbw_8gib': 231.58, 'nvbandwidth': {'host_to_device': 26.28, 'device_to_host': 6.27,
                                                                   'device_to_device_read': 423.0},
                   'source': 'azure-benchmarks'}},
    {'key': 'h20', 'label': 'H20 (HGX H20)', 'match': r'\bH20\b', 'exclude': r'PCIe|NVL',
     'nvlinks': 18, 'nvlinks_source': 'topology', 'nvlink_gbps_min': None, 'nvlink_gbps_seen': None,
     'pcie': None,
     'allreduce': None, 'allreduce_other': (), 'nvbandwidth': None, 'reference': None},
    {'key': 'a800-sxm4', 'label': 'A800 SXM4 (HGX A800)', 'match': r'\bA800-SXM4', 'exclude': None,
     'nvlinks': 8, 'nvlinks_source': 'nv8', 'nvlink_gbps_min': None, 'nvlink_gbps_seen': None,
     'pcie': None,
     'allreduce': None, 'allreduce_other': (), 'nvbandwidth': None, 'reference': None},
    {'key': 'h800-sxm', 'label': 'H800 SXM5 (HGX H800)', 'match': r'\bH800\b', 'exclude': r'PCIe|NVL',
     'nvlinks': 8, 'nvlinks_source': 'nv8', 'nvlink_gbps_min': None, 'nvlink_gbps_seen': None,
     'pcie': None,
     'allreduce': None, 'allreduce_other': (), 'nvbandwidth': None, 'reference': None},
    {'key': 'v100-sxm2', 'label': 'V100 SXM2 (DGX-1 style hybrid cube-mesh)', 'match': r'\bV100-SXM2', 'exclude': None,
     'nvlinks': 6, 'nvlinks_source': 'dgx1-v100', 'nvlink_gbps_min': None, 'nvlink_gbps_seen': None,
     'topology': 'hybrid-cube-mesh',
     'pcie': None,
     'allreduce': _allreduce(110.0, 8 * GIB, 8 * GIB, 'azure-nhc', 'Standard_ND40rs_v2: check_nccl_allreduce 110.0 1 8G'),
     'allreduce_other': (),
     'nvbandwidth': {'host_to_device_memcpy_ce': 9.0, 'device_to_host_memcpy_ce': 9.0,
                     'device_to_device_memcpy_read_ce': None, 'source': 'azure-nhc',
                     'note': 'check_gpu_bw 9 (ND40rs_v2: no P2P figure)'},
     'reference': None},
)

# Clock event reasons (nvidia-smi -q -x <clocks_event_reasons>, parsed by _nvsmi): what an Active reason means for a
# node that should train.  Sources: nvidia-smi-help (HW Slowdown = clocks cut by 2 or more: HW Thermal Slowdown or HW
# Power Brake Slowdown; SW Power Cap = the power limit, a setting), azure-nhc (azure_gpu_clock_throttling.nhc flags
# every active reason but idle, none and sw_power_cap), and the GPU double's source for a real HW Power Brake capture
# (tests/testbed/gpu_double/REALITY.md).  sw_thermal_slowdown: nvidia-smi's help says the driver's thermal capping
# holds the clocks below the requested ones because the GPU is above its maximum operating temperature: a job runs
# slower until the node is cooled: fail (issue #28 asks for it; Azure logs every reason but idle and SW Power Cap).
CLOCK_REASONS = {
    'hw_slowdown': 'fail',
    'hw_thermal_slowdown': 'fail',
    'hw_power_brake_slowdown': 'fail',
    'sw_thermal_slowdown': 'fail',
    'sw_power_cap': 'pass',
    'gpu_idle': 'pass',
    'applications_clocks_setting': 'pass',
    'sync_boost': 'pass',
    'display_clocks_setting': 'pass',
}
CLOCK_REASONS_SOURCES = ('nvidia-smi-help', 'azure-nhc')

# Row remapping (Ampere and later; _nvsmi remapped_rows).  pending: fail, a GPU reset (or reboot) applies the remap
# (nvidia-mem-error-mgmt; azure-nhc and oci-hpc fail it); failure: fail, replace the GPU (nvidia-mem-error-mgmt RMA
# condition; oci-hpc "Terminate"); uncorrectable rows above 512: fail (azure-nhc "too high", oci-hpc,
# dcgm-health DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE).
REMAPPED_ROWS = {'pending': 'fail', 'failure': 'fail', 'uncorrectable_max': 512,
                 'sources': ('nvidia-mem-error-mgmt', 'azure-nhc', 'oci-hpc', 'dcgm-health')}

# NVLink error counters (nvidia-smi nvlink -e, parsed by parsers/_nvlink): DCGM's health watch fails a GPU whose replay
# or recovery counter grows at all (DCGM_LIMIT_MAX_NVLINK_ERROR 1) and whose CRC counter grows by 100 or more per
# second; slower CRC growth is a warning.  Counters are totals since the driver loaded (or since nvidia-smi nvlink
# -r): a judgement needs two reads (the growth), as DCGM takes one per watch interval.
NVLINK_ERRORS = {'replay_recovery_growth_max': 0, 'crc_per_second_max': 100.0, 'sources': ('dcgm-health',)}
# One read (the readiness gather): the counters since the driver loaded stand for their growth over that time; replay
# and recovery above 0 fail (DCGM fails any growth); CRC has no count threshold (DCGM's is a rate): a site may set
# one (nvlink_crc_errors_max), else a CRC count above 0 warns.
NVLINK_ERRORS_SINCE_LOAD = {'replay': 0, 'recovery': 0, 'crc': None}

# PCIe replays allowed per minute and lane, by link generation (dcgm-health: 10^-12 errors per bit at the lane rate):
# a link of generation g and w lanes may replay ceil(rate[g] * w) times a minute.
PCIE_REPLAYS_PER_MINUTE_PER_LANE = {1: 0.15, 2: 0.3, 3: 0.48, 4: 0.96, 5: 1.92, 6: 3.84}

# The PCIe link at rest: nvidia-smi's help says the current generation and width "may be reduced when the GPU is not
# in use" (nvidia-smi-help); the captures show idle GPUs at generation 1 with the full width (RTX 3060, RTX A5000,
# K80) while data-centre boards idle at their full generation (H100, B200, GB300).  A width below the board's is not
# power saving on an HGX board (oci-hpc check_gpu_pcie expects x16 on every GPU); a generation below the board's is
# only trusted under load (the nvbandwidth host<->device gate measures it).
PCIE_IDLE_RULE = ('width_current below the model\'s width fails; gen_current below gen_max passes at rest (power '
                  'saving) and is judged by the host<->device bandwidth gate under load')
PCIE_IDLE_SOURCES = ('nvidia-smi-help', 'captures', 'oci-hpc')

# VBIOS: every GPU of a node should run the same VBIOS (azure-nhc check_vbios_version fails a node with more than one;
# issue #28 asks for a warning).
VBIOS_RULE = 'one VBIOS version across the GPUs of a node'
VBIOS_SOURCES = ('azure-nhc',)

# The all_reduce_perf run the published figures were taken with (azure-nhc, oci-hpc): one message size (Azure) or a
# range whose "Avg bus bandwidth" is judged (OCI); the data check on (-c 1), so #wrong and "Out of bounds values" are
# counted; any wrong value fails (azure-nhc fails on "FAILED" in the output).
ALLREDUCE_WRONG_MAX = 0


class ThresholdError(ValueError):
    """An override that is not a threshold (the message names the key and the value)."""


def _compile(entry):
    pattern = re.compile(entry['match'])
    exclude = re.compile(entry['exclude']) if entry.get('exclude') else None
    return pattern, exclude


_COMPILED = tuple((entry, _compile(entry)) for entry in MODELS)


def model_for(product_name):
    """The MODELS entry of an nvidia-smi product name (``NVIDIA H100 80GB HBM3``), or None."""
    for entry, (pattern, exclude) in _COMPILED:
        if pattern.search(product_name or '') and not (exclude and exclude.search(product_name or '')):
            return entry
    return None


def pcie_replays_per_minute(gen, width):
    """The PCIe replays a link may make per minute (dcgm-health), or None for an unknown generation."""
    rate = PCIE_REPLAYS_PER_MINUTE_PER_LANE.get(min(int(gen), max(PCIE_REPLAYS_PER_MINUTE_PER_LANE))) \
        if gen else None
    if rate is None or not width:
        return None
    whole, fraction = divmod(rate * int(width), 1)
    return int(whole) + (1 if fraction > 1e-9 else 0)


_OVERRIDABLE = ('nvlinks', 'nvlink_gbps', 'pcie_gen', 'pcie_width', 'allreduce_busbw_gbps', 'allreduce_min_bytes',
                'allreduce_max_bytes', 'host_to_device_gbps', 'device_to_host_gbps', 'device_to_device_read_gbps',
                'remapped_rows_uncorrectable_max', 'nvlink_replay_errors_max', 'nvlink_recovery_errors_max',
                'nvlink_crc_errors_max')
# Counts of errors allowed: 0 is a threshold (none allowed).
_ZERO_ALLOWED = ('remapped_rows_uncorrectable_max', 'nvlink_replay_errors_max', 'nvlink_recovery_errors_max',
                 'nvlink_crc_errors_max')


def thresholds(product_name, overrides=None):
    """The flat thresholds for one GPU model, each ``{'value', 'source'}``; ``overrides`` (``{key: value}``, keys in
    ``_OVERRIDABLE``; a site's setting) win and name ``setting`` as their source.  A key without any value is
    ``{'value': None, 'source': None}``: the check that needs it skips and says which key supplies one.

    Raises ThresholdError for an unknown key or a value that is not a positive number.
    """
    entry = model_for(product_name)
    out = {}

    def put(key, value, source):
        out[key] = {'value': value, 'source': SOURCES.get(source, source) if value is not None else None,
                    'source_key': source if value is not None else None}

    put('nvlinks', entry and entry['nvlinks'], entry and entry['nvlinks_source'])
    put('nvlink_gbps', entry and entry.get('nvlink_gbps_min'), 'oci-hpc')
    pcie = (entry or {}).get('pcie') or {}
    put('pcie_gen', pcie.get('gen'), pcie.get('source'))
    put('pcie_width', pcie.get('width'), pcie.get('source'))
    allreduce = (entry or {}).get('allreduce') or {}
    put('allreduce_busbw_gbps', allreduce.get('busbw_gbps'), allreduce.get('source'))
    put('allreduce_min_bytes', allreduce.get('min_bytes'), allreduce.get('source'))
    put('allreduce_max_bytes', allreduce.get('max_bytes'), allreduce.get('source'))
    nvb = (entry or {}).get('nvbandwidth') or {}
    put('host_to_device_gbps', nvb.get('host_to_device_memcpy_ce'), nvb.get('source'))
    put('device_to_host_gbps', nvb.get('device_to_host_memcpy_ce'), nvb.get('source'))
    put('device_to_device_read_gbps', nvb.get('device_to_device_memcpy_read_ce'), nvb.get('source'))
    put('remapped_rows_uncorrectable_max', REMAPPED_ROWS['uncorrectable_max'], 'azure-nhc')
    for kind in ('replay', 'recovery', 'crc'):
        put('nvlink_{0}_errors_max'.format(kind), NVLINK_ERRORS_SINCE_LOAD[kind], 'dcgm-health')
    for key, value in sorted((overrides or {}).items()):
        if key not in _OVERRIDABLE:
            raise ThresholdError('{0}: not a threshold (allowed: {1})'.format(key, ', '.join(_OVERRIDABLE)))
        if value is None:
            continue
        if key in _ZERO_ALLOWED:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ThresholdError('{0}={1!r}: a count of errors is a whole number, 0 or more'.format(key, value))
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ThresholdError('{0}={1!r}: a threshold is a number above 0'.format(key, value))
        out[key] = {'value': value, 'source': 'setting', 'source_key': 'setting'}
    out['model'] = {'value': entry['key'] if entry else None, 'source': None, 'source_key': None}
    return out


def models():
    """A deep copy of MODELS (callers may not change the table)."""
    return copy.deepcopy(MODELS)
