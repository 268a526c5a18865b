# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice.
#
# Runs ``nvidia-smi -q -x`` with a hard timeout (through _runner.run, which puts coreutils timeout(1) around it and
# kills the process group of a hung nvidia-smi) and turns its output into the ``ansible_facts.nvidia`` namespace (see
# docs/contracts.md). Used by the nvidia_gpu_facts, nvidia_gpu and gpu_node_facts modules.
# collect_topology runs ``nvidia-smi topo -m`` (gpu_node_facts, for the readiness check gpu.topology) in the same
# module run, and parses it with _nvidia_smi_topo.parse_topo_matrix.  collect_nvlink runs ``nvidia-smi nvlink -s`` and
# ``-e`` (for the readiness check nvlink.links) and returns their raw outputs: the controller parses and judges them.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._facts_output import FactsReadError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import (
    NvidiaSmiParseError,
    parse_nvsmi_xml,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import CommandNotFound, run
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_topo import (
    TopologyParseError,
    parse_topo_matrix,
)


class NvidiaCollectError(FactsReadError):
    """Gathering NVIDIA facts failed in a way the calling module must fail on."""

    OUTPUT_DEFAULT = ''
    KEEP_NONE = True


class NvidiaSmiTimeout(NvidiaCollectError):
    """``nvidia-smi`` hung (typically a GPU that fell off the bus) and was killed."""


def find_nvidia_smi(module, nvidia_smi=None):
    """Path of nvidia-smi, or None when it is not installed."""
    if nvidia_smi:
        if os.path.isfile(nvidia_smi) and os.access(nvidia_smi, os.X_OK):
            return nvidia_smi
        return None
    return module.get_bin_path('nvidia-smi', required=False, opt_dirs=['/usr/bin', '/usr/local/bin'])


def empty_facts(error):
    return {
        'present': False,
        'error': error,
        'driver_version': None,
        'cuda_version': None,
        'attached_gpus': 0,
        'gpu_blocks': 0,
        'dtd_version': None,
        'timestamp': None,
        'partial': False,
        'gpus': [],
        'nvidia_smi': None,
    }


def _said(out, err):
    return '\n'.join(part.strip() for part in (out, err) if part and part.strip())


def facts_from_output(argv, rc, out, err, include_supported_clocks=True):
    """Turn what ``nvidia-smi -q -x`` printed into the ``ansible_facts.nvidia`` namespace.

    rc 0: the parsed XML (``present`` true, ``partial`` false); output that is not XML raises NvidiaCollectError.
    rc non-zero after printing XML (15: a GPU fell off the bus): the GPUs it printed, ``present`` and ``partial``
    true, ``error`` what it wrote on stderr. rc non-zero without XML: ``present`` false, ``error`` what it said.
    """
    if rc != 0:
        if '<nvidia_smi_log' in (out or ''):
            try:
                facts = parse_nvsmi_xml(out, include_supported_clocks=include_supported_clocks)
            except NvidiaSmiParseError as exc:
                # XML cut off (a GPU fell off the bus while nvidia-smi printed): what it said is stderr, never the
                # kilobytes of XML it printed.
                return empty_facts((err or '').strip() or '{0} exited with rc {1} after printing {2} bytes of XML '
                                   'that cannot be parsed ({3})'.format(' '.join(argv), rc, len(out), exc))
            facts['present'] = True
            facts['partial'] = True
            facts['error'] = (err or '').strip() or '{0} exited with rc {1} after printing its XML'.format(
                ' '.join(argv), rc)
            return facts
        return empty_facts(_said(out, err) or '{0} exited with rc {1} and printed nothing'.format(' '.join(argv), rc))
    try:
        facts = parse_nvsmi_xml(out, include_supported_clocks=include_supported_clocks)
    except NvidiaSmiParseError as exc:
        raise NvidiaCollectError('cannot parse the output of {0}: {1}'.format(' '.join(argv), exc),
                                 cmd=argv, rc=rc, stdout=out, stderr=err)
    facts['present'] = True
    facts['partial'] = False
    facts['error'] = None
    return facts


def query_xml(module, binary, timeout, option='nvidia_timeout'):
    """Run ``nvidia-smi -q -x``; return (argv, rc, stdout, stderr). Raises NvidiaSmiTimeout when it hangs and
    NvidiaCollectError when it cannot be run. ``option`` names the module option the timeout came from."""
    argv = [binary, '-q', '-x']
    try:
        result = run(module, argv, timeout=timeout, option=option)
    except CommandNotFound as exc:
        raise NvidiaCollectError(str(exc), cmd=argv)
    if result.timed_out:
        raise NvidiaSmiTimeout(
            'nvidia-smi -q -x did not answer within the timeout of {0} seconds and was killed; '
            'a GPU may have fallen off the bus (check dmesg for Xid 79) or the driver is hung'.format(timeout),
            cmd=argv, rc=None, stdout=result.stdout, stderr=result.stderr)
    return argv, result.rc, result.stdout, result.stderr


def collect_nvidia_facts(module, timeout=60, include_supported_clocks=True, nvidia_smi=None, option='nvidia_timeout'):
    """Return the ``ansible_facts.nvidia`` namespace.

    ``present`` is false (and ``error`` says why) when nvidia-smi is missing or
    the driver does not answer; ``partial`` is true when it printed XML but exited
    non-zero (see facts_from_output). Raises NvidiaSmiTimeout when nvidia-smi hangs
    and NvidiaCollectError when it answers with output that is not valid XML.
    """
    binary = find_nvidia_smi(module, nvidia_smi)
    if binary is None:
        return empty_facts('nvidia-smi not found{0}'.format(
            ' at {0}'.format(nvidia_smi) if nvidia_smi else ' in PATH, /usr/bin or /usr/local/bin'))
    argv, rc, out, err = query_xml(module, binary, timeout, option)
    facts = facts_from_output(argv, rc, out, err, include_supported_clocks)
    # The binary that was read: the gpu_settings plan builds its commands (and the replay file) with this path and
    # passes it to nvidia_gpu, so that the module runs what the plan compared.
    facts['nvidia_smi'] = binary
    return facts


def topology_from_output(argv, rc, out, err):
    """``ansible_facts.nvidia.topology`` from what ``nvidia-smi topo -m`` printed: ``matrix`` (parse_topo_matrix) and
    ``error`` (None, or why there is no matrix: the exit status and what nvidia-smi said, or the line that does not
    parse)."""
    if rc != 0:
        return {'matrix': None, 'error': '{0} exited with rc {1}: {2}'.format(
            ' '.join(argv), rc, _said(out, err) or 'no output')}
    try:
        return {'matrix': parse_topo_matrix(out), 'error': None}
    except TopologyParseError as exc:
        return {'matrix': None, 'error': 'cannot parse the output of {0}: {1}'.format(' '.join(argv), exc)}


def collect_topology(module, binary, timeout, option='nvidia_timeout'):
    """Run ``nvidia-smi topo -m``; never raises (a failure is the ``error`` of the result, and gpu.topology fails with
    it: the rest of the NVIDIA facts stay good)."""
    argv = [binary, 'topo', '-m']
    try:
        result = run(module, argv, timeout=timeout, option=option)
    except CommandNotFound as exc:
        return {'matrix': None, 'error': str(exc)}
    if result.timed_out:
        return {'matrix': None, 'error': '{0} did not answer within the timeout of {1} seconds and was killed'.format(
            ' '.join(argv), timeout)}
    return topology_from_output(argv, result.rc, result.stdout, result.stderr)


NVLINK_READS = (('status', '-s'), ('errors', '-e'))


def collect_nvlink(module, binary, timeout):
    """Run ``nvidia-smi nvlink -s`` and ``nvidia-smi nvlink -e``; ``{status, errors}``, each ``{rc, stdout, stderr,
    error}`` as printed (``error``: not run, or killed at the timeout).  Never raises; nothing is parsed here."""
    out = {}
    for key, flag in NVLINK_READS:
        argv = [binary, 'nvlink', flag]
        try:
            result = run(module, argv, timeout=timeout)
        except CommandNotFound as exc:
            out[key] = {'rc': None, 'stdout': '', 'stderr': '', 'error': str(exc)}
            continue
        error = None
        if result.timed_out:
            error = '{0} did not answer within the timeout of {1} seconds and was killed'.format(' '.join(argv), timeout)
        out[key] = {'rc': result.rc, 'stdout': result.stdout, 'stderr': result.stderr, 'error': error}
    return out
