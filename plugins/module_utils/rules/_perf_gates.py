# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The performance gates of readiness (opt-in: ``nodeprep_readiness_performance``): where they may run, what the
node runs for them, and the verdict on what it printed.  Pure functions; no Ansible import; Python 3.6 and later.

* :func:`where` - the one rule of *where* a gate runs: only on a node that runs no job.  With a Slurm controller
  known, Slurm's record of the node decides (read by the rolling maintenance backend, ``rolling_slurm op=state``, and
  read here with its own rule, rules/_rolling.node_status): a node with an active job or a completing one is busy and
  skips; a drained node (DRAINED in sinfo: a rolling batch's verify step, an admin's drain) or an IDLE node that
  takes jobs runs them; any other state (DOWN, a reservation, powering) skips naming it.  Without a scheduler (or a
  node Slurm does not know) the operator says so: ``nodeprep_readiness_node_idle: true`` runs them, else they skip.
* parsers/_perf_cli.py - the commands the gather runs on the node (argv lists for the one runner, LC_ALL=C, under a
  time limit; collect/_health.read_perf).
* :func:`judge_allreduce`, :func:`judge_nvbandwidth` - ``(status, expected, observed)`` from the raw outputs the
  node returned, parsed here on the controller (parsers/_nccl_tests.py, parsers/_nvbandwidth.py) and held against
  the per-model figures of rules/_fitness_thresholds.py (each with its public source).

``all_reduce_perf`` runs once, one process over every GPU (``-g <GPUs>``, the perf_tools role builds it with MPI=0),
from 1 GiB to 16 GiB by factors of 2 with the data check on (``-c 1``): every range a published figure was taken
over (Azure: one size, 16 GiB, or 8 GiB; OCI: 1 GiB to 16 GiB) is a subset, and the figure compared is what
nccl-tests prints as ``Avg bus bandwidth`` for such a run: the mean bus bandwidth of every out-of-place and in-place
row of those sizes (NVIDIA/nccl-tests src/common.cu adds each printed row's busBw to ``bw[0]`` and counts it).
``nvbandwidth`` runs the three copy-engine cases Azure's check_gpu_bw runs (host to device, device to host, device
to device read); every measured cell is held against the model's figure, as Azure does.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nccl_tests
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvbandwidth
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _perf_cli
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _fitness_thresholds as T
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling

ALLREDUCE = 'perf.allreduce'
NVBANDWIDTH = 'perf.nvbandwidth'
GATES = (ALLREDUCE, NVBANDWIDTH)
TOOL = {ALLREDUCE: 'all_reduce_perf', NVBANDWIDTH: 'nvbandwidth'}
# The fact the gather fills (gpu_node_facts perf_*): {tool: {path, argv, rc, stdout, stderr, timed_out, seconds}}.
FACT = 'nodeprep_perf'
# The controller's decision of where (:func:`where`), put beside the gather's facts by the readiness_info action.
WHERE_FACT = 'nodeprep_perf_where'

GIB = _perf_cli.GIB
# The all_reduce_perf run the gather makes (parsers/_perf_cli.allreduce_argv): its sizes in bytes.
ALLREDUCE_MIN_BYTES = _perf_cli.ALLREDUCE_MIN_BYTES
ALLREDUCE_MAX_BYTES = _perf_cli.ALLREDUCE_MAX_BYTES
# The nvbandwidth cases (parsers/_perf_cli.nvbandwidth_argv) and the threshold key of each
# (rules/_fitness_thresholds.thresholds).
NVB_CASES = tuple(zip(_perf_cli.NVB_CASES, ('host_to_device_gbps', 'device_to_host_gbps',
                                            'device_to_device_read_gbps')))
# The thresholds a site may set (nodeprep_readiness_performance_thresholds); the others stay the table's.
OVERRIDABLE = ('allreduce_busbw_gbps', 'allreduce_min_bytes', 'allreduce_max_bytes', 'host_to_device_gbps',
               'device_to_host_gbps', 'device_to_device_read_gbps')
SETTING = 'nodeprep_readiness_performance'
IDLE_SETTING = 'nodeprep_readiness_node_idle'
THRESHOLDS_SETTING = 'nodeprep_readiness_performance_thresholds'
TIMEOUT_SETTING = 'nodeprep_readiness_performance_timeout'
REMEDY_TOOLS = ('role gpufleet.nodeprep.perf_tools with nodeprep_perf_tools_install: true, or the path of the '
                'site\'s binary in nodeprep_perf_tools_{0}')


class PerfGateError(ValueError):
    """A setting of the gates that cannot be used (the message names it, the value and what is allowed)."""


def check_overrides(overrides):
    """The threshold overrides as given (a dict of OVERRIDABLE keys to positive numbers); PerfGateError otherwise."""
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise PerfGateError('{0}={1!r}: a dictionary of thresholds (allowed keys: {2})'.format(
            THRESHOLDS_SETTING, overrides, ', '.join(OVERRIDABLE)))
    unknown = sorted(str(k) for k in overrides if k not in OVERRIDABLE)
    if unknown:
        raise PerfGateError('{0}: unknown keys {1}; allowed: {2}'.format(
            THRESHOLDS_SETTING, ', '.join(unknown), ', '.join(OVERRIDABLE)))
    try:
        T.thresholds(None, overrides)
    except T.ThresholdError as exc:
        raise PerfGateError('{0}: {1}'.format(THRESHOLDS_SETTING, exc))
    for key in ('allreduce_min_bytes', 'allreduce_max_bytes'):
        value = overrides.get(key)
        if value is not None and not ALLREDUCE_MIN_BYTES <= value <= ALLREDUCE_MAX_BYTES:
            raise PerfGateError('{0}.{1}={2!r}: the gate runs all_reduce_perf from {3} to {4} bytes; allowed: a size '
                                'in that range'.format(THRESHOLDS_SETTING, key, value, ALLREDUCE_MIN_BYTES,
                                                       ALLREDUCE_MAX_BYTES))
    low, high = overrides.get('allreduce_min_bytes'), overrides.get('allreduce_max_bytes')
    if low is not None and high is not None and low > high:
        raise PerfGateError('{0}: allreduce_min_bytes {1} is above allreduce_max_bytes {2}'.format(
            THRESHOLDS_SETTING, low, high))
    return dict(overrides)


# ---------------------------------------------------------------------------------------------------------------------
# where the gates may run


def _jobs_text(jobs):
    return ', '.join(str(j) for j in jobs)


def where(settings, node_state=None):
    """``{'run': bool, 'why': str}``: whether the performance gates may run on this node, and why (the skip reason
    when they may not).  ``settings``: the readiness settings (SETTING, IDLE_SETTING); ``node_state``: None when no
    scheduler was asked, else ``{'scheduler': 'slurm', 'record': <scontrol show node -o record> or None, 'jobs':
    [active job ids on the node], 'error': why Slurm could not be read, or None}``."""
    if not settings.get(SETTING):
        return {'run': False, 'why': 'not run: {0} is false (they load every GPU for about a minute)'.format(SETTING)}
    if node_state is not None and node_state.get('error'):
        return {'run': False, 'why': 'not run: the scheduler could not be read, so the node may run a job: {0}'.format(
            node_state['error'])}
    record = (node_state or {}).get('record')
    if node_state is not None and isinstance(record, dict):
        status = _rolling.node_status(record)
        state = 'State={0}'.format(status['state'] or '?')
        jobs = list(node_state.get('jobs') or [])
        if jobs:
            return {'run': False, 'why': 'not run: busy, Slurm runs job {0} on this node ({1})'.format(
                _jobs_text(jobs), state)}
        if status['completing']:
            return {'run': False, 'why': 'not run: busy, a job is completing on this node ({0})'.format(state)}
        if status['base'] in _rolling.BUSY_BASES:
            return {'run': False, 'why': 'not run: busy, Slurm has the node allocated ({0})'.format(state)}
        if status['drained']:
            reason = status['reason'] or status['stale_reason']
            return {'run': True, 'why': 'Slurm: drained, no job ({0}{1})'.format(
                state, ', reason {0}'.format(reason) if reason else '')}
        if status['base'] == 'IDLE' and status['usable']:
            return {'run': True, 'why': 'Slurm: idle, no job ({0})'.format(state)}
        return {'run': False, 'why': 'not run: Slurm shows the node neither idle nor drained ({0})'.format(state)}
    known = 'Slurm does not know this node' if node_state is not None else 'no scheduler was asked'
    if settings.get(IDLE_SETTING):
        return {'run': True, 'why': '{0}; {1} is true (the operator says it runs no job)'.format(known, IDLE_SETTING)}
    return {'run': False, 'why': 'not run: {0} and {1} is false (the gates run only on a node that runs no job: '
                                 'idle or drained in Slurm, or declared idle)'.format(known, IDLE_SETTING)}


# ---------------------------------------------------------------------------------------------------------------------
# the verdict


def _gb(value):
    return '{0:.1f} GB/s'.format(value)


def _bytes(value):
    if value % GIB == 0:
        return '{0} GiB'.format(value // GIB)
    return '{0} B'.format(value)


def _source(figure):
    """``model: source key`` of a threshold (rules/_fitness_thresholds.thresholds), for the expected text."""
    return figure.get('source_key') or 'no source'


def _model(gpus):
    names = [g.get('name') for g in gpus if g.get('name')]
    return names[0] if names else None


def _run_problem(run, tool):
    """Why the tool's run gave nothing to judge, or None."""
    if not isinstance(run, dict):
        return '{0} was not run by the gather'.format(tool)
    if run.get('rc') is None:
        return '{0} {1}'.format(tool, run.get('stderr') or 'not run')
    if run.get('rc') == 127 and not run.get('stdout'):
        return '{0} cannot be run: {1}; install it with {2}'.format(
            tool, (run.get('stderr') or 'not found').strip().splitlines()[-1], REMEDY_TOOLS.format(tool))
    if run.get('timed_out'):
        return '{0} did not finish within {1} s ({2}); killed'.format(tool, run.get('timeout'), ' '.join(
            run.get('argv') or []))
    if run.get('rc') != 0:
        lines = [line for line in (run.get('stderr') or run.get('stdout') or '').strip().splitlines() if line.strip()]
        return '{0} failed (rc={1}): {2}'.format(tool, run.get('rc'), lines[-1] if lines else 'no output')
    return None


def skip_or_run(facts, settings):
    """``(status, observed)`` for a gate that did not run (``skip`` with the reason), or None when it ran.  Facts
    without the controller's decision (WHERE_FACT) are judged as a node no scheduler was asked about."""
    decision = facts.get(WHERE_FACT)
    if not isinstance(decision, dict):
        decision = where(settings, None)
    if not decision.get('run'):
        return ('skip', decision.get('why') or 'not run')
    return None


def _gpus(facts):
    nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
    gpus = nvidia.get('gpus')
    return gpus if isinstance(gpus, list) else []


def judge_allreduce(facts, settings):
    """perf.allreduce: ``(status, expected, observed)``."""
    overrides = check_overrides(settings.get(THRESHOLDS_SETTING))
    gpus = _gpus(facts)
    figures = T.thresholds(_model(gpus), overrides)
    busbw = figures['allreduce_busbw_gbps']
    low = figures['allreduce_min_bytes']['value'] or ALLREDUCE_MIN_BYTES
    high = figures['allreduce_max_bytes']['value'] or ALLREDUCE_MAX_BYTES
    sizes = _bytes(low) if low == high else '{0} to {1}'.format(_bytes(low), _bytes(high))
    if busbw['value']:
        expected = ('all_reduce_perf over all {0} GPUs: mean bus bandwidth at {1} >= {2:g} GB/s ({3}: {4}); no '
                    'wrong or out-of-bounds value'.format(len(gpus), sizes, busbw['value'], figures['model']['value'],
                                                          _source(busbw)))
    else:
        expected = ('all_reduce_perf over all {0} GPUs: no wrong or out-of-bounds value (no bus bandwidth figure '
                    'for {1}: {2}.allreduce_busbw_gbps)').format(len(gpus), _model(gpus) or 'this GPU',
                                                                 THRESHOLDS_SETTING)
    skipped = skip_or_run(facts, settings)
    if skipped:
        return (skipped[0], expected, skipped[1])
    if low > high:
        return ('fail', expected, 'the sizes to average are empty: allreduce_min_bytes {0} is above '
                                  'allreduce_max_bytes {1} (set both in {2})'.format(low, high, THRESHOLDS_SETTING))
    run = (facts.get(FACT) or {}).get('all_reduce_perf')
    problem = _run_problem(run, 'all_reduce_perf')
    if problem:
        return ('fail', expected, problem)
    try:
        parsed = _nccl_tests.parse_nccl_tests(run.get('stdout') or '')
    except _nccl_tests.NcclTestsParseError as exc:
        return ('fail', expected, 'all_reduce_perf printed what is not nccl-tests output: {0}'.format(exc))
    problems = []
    ranks = len(parsed['devices'])
    if ranks != len(gpus):
        problems.append('ran on {0} of the {1} GPUs'.format(ranks, len(gpus)))
    wrong = _nccl_tests.wrong_rows(parsed)
    if wrong:
        problems.append('#wrong above 0 at {0}'.format(', '.join(
            '{0} (out-of-place {1}, in-place {2})'.format(_bytes(size), a, b) for size, a, b in wrong)))
    if parsed['out_of_bounds'] is None:
        problems.append('the output ends before "# Out of bounds values" (incomplete run)')
    elif parsed['out_of_bounds'] or not parsed['out_of_bounds_ok']:
        problems.append('{0} out-of-bounds values (FAILED)'.format(parsed['out_of_bounds']))
    rows = [row for row in parsed['rows'] if low <= row['size'] <= high]
    values = [half['busbw'] for row in rows for half in (row['out_of_place'], row['in_place'])
              if half and half.get('busbw') is not None]
    if not values:
        problems.append('no result row from {0} (rows: {1})'.format(
            sizes, ', '.join(_bytes(row['size']) for row in parsed['rows']) or 'none'))
        return ('fail', expected, '; '.join(problems))
    mean = sum(values) / len(values)
    measured = 'mean bus bandwidth {0} at {1} over {2} GPUs'.format(_gb(mean), sizes, ranks)
    if busbw['value'] and mean < busbw['value']:
        problems.append('{0}, below the {1:g} GB/s of {2} ({3})'.format(
            measured, busbw['value'], figures['model']['value'], _source(busbw)))
    if problems:
        return ('fail', expected, '; '.join(problems))
    if not busbw['value']:
        return ('skip', expected, '{0}; no wrong value; no figure to hold it against (set {1}.allreduce_busbw_gbps)'
                .format(measured, THRESHOLDS_SETTING))
    return ('pass', expected, '{0}; no wrong value'.format(measured))


def _cell_label(case, row, column):
    if case.startswith('device_to_device'):
        return 'GPU {0} -> GPU {1}'.format(row, column)
    return 'GPU {0}'.format(column)


def judge_nvbandwidth(facts, settings):
    """perf.nvbandwidth: ``(status, expected, observed)``."""
    overrides = check_overrides(settings.get(THRESHOLDS_SETTING))
    gpus = _gpus(facts)
    figures = T.thresholds(_model(gpus), overrides)
    wanted = [(case, figures[key]) for case, key in NVB_CASES]
    judged = ['{0} >= {1:g} GB/s'.format(case, figure['value']) for case, figure in wanted if figure['value']]
    sources = sorted(set(_source(figure) for _case, figure in wanted if figure['value']))
    if judged:
        expected = 'nvbandwidth, every cell: {0} ({1}: {2})'.format('; '.join(judged), figures['model']['value'],
                                                                    ', '.join(sources))
    else:
        expected = 'nvbandwidth runs {0} on every GPU (no figure for {1}: {2})'.format(
            ', '.join(case for case, _f in wanted), _model(gpus) or 'this GPU', THRESHOLDS_SETTING)
    skipped = skip_or_run(facts, settings)
    if skipped:
        return (skipped[0], expected, skipped[1])
    run = (facts.get(FACT) or {}).get('nvbandwidth')
    problem = _run_problem(run, 'nvbandwidth')
    if problem:
        return ('fail', expected, problem)
    try:
        parsed = _nvbandwidth.parse_nvbandwidth(run.get('stdout') or '')
    except _nvbandwidth.NvbandwidthParseError as exc:
        return ('fail', expected, 'nvbandwidth printed what is not nvbandwidth output: {0}'.format(exc))
    problems, seen = [], []
    if parsed['error']:
        problems.append('nvbandwidth: {0}'.format(parsed['error']))
    for case, figure in wanted:
        found = _nvbandwidth.testcase(parsed, case)
        if found is None:
            waived = case.startswith('device_to_device') and len(gpus) < 2
            if not waived:
                problems.append('{0} did not run'.format(case))
            continue
        if found['status'] != 'Passed':
            if not (found['status'] == 'Waived' and len(gpus) < 2):
                problems.append('{0}: {1}{2}'.format(case, found['status'], ': ' + found['error'] if found.get('error')
                                                     else ''))
            continue
        cells = _nvbandwidth.cells(found)
        if not cells:
            problems.append('{0}: no measured cell'.format(case))
            continue
        columns = len(found['column_labels'])
        if columns != len(gpus):
            problems.append('{0}: {1} GPU columns, the node has {2} GPUs'.format(case, columns, len(gpus)))
        lowest = min(cells, key=lambda cell: cell[2])
        seen.append('{0} min {1} ({2})'.format(case, _gb(lowest[2]), _cell_label(case, lowest[0], lowest[1])))
        if figure['value']:
            below = [cell for cell in cells if cell[2] < figure['value']]
            if below:
                problems.append('{0}: {1} of {2} cells below {3:g} GB/s: {4}'.format(
                    case, len(below), len(cells), figure['value'], ', '.join(
                        '{0} {1}'.format(_cell_label(case, r, c), _gb(v)) for r, c, v in below[:8])
                    + (', ...' if len(below) > 8 else '')))
    if problems:
        return ('fail', expected, '; '.join(problems + seen))
    if not judged:
        return ('skip', expected, '{0}; no figure to hold them against'.format('; '.join(seen)))
    return ('pass', expected, '; '.join(seen))
