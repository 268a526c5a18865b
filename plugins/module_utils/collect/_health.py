# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What readiness reads on the node besides the roles' facts, in the same round trip as the rest of gpu_node_facts:
the NVIDIA Xid lines of the kernel log of this boot, NVIDIA DCGM's discovery and diagnostic (opt-in), and the
performance gates' runs of all_reduce_perf and nvbandwidth (opt-in, only where the controller decided the node runs
no job: rules/_perf_gates.where).  Raw outputs only: the controller judges them (rules/_readiness.py, rules/_dcgm.py,
rules/_perf_gates.py).  Every command goes through the
collection's runner (collect/_runner.py; LC_ALL=C, argv lists).  No Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import time

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import CommandNotFound, run, run_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dcgmi_cli as _dcgmi
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _perf_cli

# The marker of an NVIDIA Xid event in the kernel log (rules/_readiness.parse_xid_lines reads the rest).
XID_MARK = 'NVRM: Xid'
# Seconds dcgmi discovery -l may take (it only asks the host engine).
DCGM_DISCOVERY_TIMEOUT = 60


def read_kernel_log(module, lines):
    """``{source, lines, error}``: the Xid lines of the last ``lines`` kernel log lines of this boot, from journalctl,
    else from dmesg where journald has no log; ``lines`` None and ``error`` the reason when neither could be read."""
    errors = []
    for tool, argv in (('journalctl', ['-k', '-b', '0', '--no-pager', '-q', '-o', 'short-iso', '-n', str(lines)]),
                       ('dmesg', [])):
        path = module.get_bin_path(tool)
        if path:
            rc, out, err = run_status(module, [path] + argv)
            if rc == 0:
                return {'source': '{0} (last {1} lines)'.format('journalctl -k -b 0' if argv else tool, lines),
                        'lines': [line for line in out.splitlines()[-lines:] if XID_MARK in line], 'error': None}
            errors.append('{0} rc={1}: {2}'.format(tool, rc, err.strip()))
    return {'source': None, 'lines': None, 'error': '; '.join(errors) or 'neither journalctl nor dmesg found'}


def _timed_command(module, argv, timeout):
    try:
        done = run(module, argv, timeout=timeout, option='dcgm_timeout')
    except CommandNotFound as exc:
        return {'rc': 127, 'stdout': '', 'stderr': str(exc), 'timed_out': False}
    return {'rc': done.rc, 'stdout': done.stdout, 'stderr': done.stderr, 'timed_out': done.timed_out}


def read_perf(module, paths, gpus, timeout):
    """What the performance gates judge (rules/_perf_gates.py): ``{tool: {path, argv, rc, stdout, stderr, timed_out,
    timeout, seconds}}`` for each tool of ``paths`` ({tool: path}), one after the other (both load every GPU), each
    killed after ``timeout`` seconds.  ``gpus``: how many GPUs nvidia-smi listed in this gather (all_reduce_perf -g).
    A tool that cannot be run is rc 127 with the reason; nothing is run on a node without a GPU listed."""
    out = {}
    for tool in _perf_cli.TOOLS:
        path = paths.get(tool)
        if not path:
            continue
        if tool == 'all_reduce_perf':
            argv = _perf_cli.allreduce_argv(path, gpus)
        else:
            argv = _perf_cli.nvbandwidth_argv(path)
        if not gpus:
            out[tool] = {'path': path, 'argv': argv, 'rc': None, 'stdout': '', 'timed_out': False,
                         'stderr': 'not run: nvidia-smi listed no GPU', 'timeout': timeout, 'seconds': 0.0}
            continue
        started = time.time()
        record = _timed_command(module, argv, timeout)
        record.update(path=path, argv=argv, timeout=timeout, seconds=round(time.time() - started, 3))
        out[tool] = record
    return out


def read_dcgm(module, level, timeout):
    """What gpu.dcgm_diag judges (rules/_dcgm.judge): ``{enabled, level, timeout, dcgmi}`` (``dcgmi`` None without
    DCGM), then DCGM's discovery and, when a host engine answers it, its diagnostic (``{rc, stdout, stderr,
    timed_out}`` each)."""
    probe = {'enabled': True, 'level': level, 'timeout': timeout, 'dcgmi': module.get_bin_path('dcgmi')}
    if not probe['dcgmi']:
        return probe
    probe['discovery'] = _timed_command(module, _dcgmi.discovery_argv(probe['dcgmi']),
                                        min(timeout, DCGM_DISCOVERY_TIMEOUT))
    if not _dcgmi.no_host_engine(probe['discovery']['stdout'] + probe['discovery']['stderr']):
        probe['diag'] = _timed_command(module, _dcgmi.diag_argv(probe['dcgmi'], level), timeout)
    return probe
