# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/module_utils/rules/_perf_gates.py: where the gates may run (Slurm's real records and squeue
outputs of tests/unit/plugins/module_utils/slurm/), and the verdicts on the real captures of tests/fixtures/nccl-tests
and tests/fixtures/nvbandwidth (SOURCES.md)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _perf_cli
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _perf_gates as P
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling as R

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SLURM = os.path.join(os.path.dirname(HERE), 'slurm')
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE)))), 'fixtures')
ON = {'nodeprep_readiness_performance': True, 'nodeprep_readiness_node_idle': False,
      'nodeprep_readiness_performance_thresholds': {}, 'nodeprep_readiness_performance_timeout': 600}


def _read(*parts):
    with open(os.path.join(*parts)) as handle:
        return handle.read()


def _slurm(version, name):
    folder = os.path.join(SLURM, version, 'states') if os.path.isdir(os.path.join(SLURM, version, 'states')) and \
        os.path.exists(os.path.join(SLURM, version, 'states', name)) else os.path.join(SLURM, version)
    return _read(folder, name)


def _state(version, show, node, squeue=None):
    """The node_state the readiness role hands over: the node's record and its active jobs, from real captures."""
    records = R.parse_nodes(_slurm(version, show))
    jobs = R.parse_jobs(_slurm(version, squeue)) if squeue else []
    if any(job['nodes'] for job in jobs):
        active = R.jobs_by_node(jobs, [node])[node]
    else:
        # 22.05's captures of squeue -w <node> without %N: every job listed runs on that node.
        active = R.active_jobs(jobs)
    return {'scheduler': 'slurm', 'record': records.get(node), 'jobs': active, 'error': None}


# ---------------------------------------------------------------------------------------------------------------------
# where: a busy node never runs a gate

BUSY = [
    # (Slurm, scontrol show node capture, squeue capture, node, why)
    ('22.05', 'show-node-mixed-allocated.txt', 'squeue-w-el9-tall.txt', 'el9-b200-01',
     'not run: busy, Slurm runs job 1 on this node (State=MIXED)'),
    ('22.05', 'show-node-mixed-allocated.txt', None, 'ubuntu2404-h200-01',
     'not run: busy, Slurm has the node allocated (State=ALLOCATED)'),
    # Draining: DRAIN set, the job still runs.
    ('22.05', 'show-node-draining.txt', 'squeue-w-el9-tall.txt', 'el9-b200-01',
     'not run: busy, Slurm runs job 1 on this node (State=MIXED+DRAIN)'),
    ('22.05', 'show-node-draining.txt', None, 'ubuntu2404-h200-01',
     'not run: busy, Slurm has the node allocated (State=ALLOCATED+DRAIN)'),
    ('24.11', 'show-node-hostlist-busy.txt', 'squeue-w-hostlist.txt', 'el9-b200-01',
     'not run: busy, Slurm runs job 2, 3 on this node (State=ALLOCATED)'),
    ('24.11', 'show-node-hostlist-busy.txt', 'squeue-w-hostlist.txt', 'ubuntu2404-h200-01',
     'not run: busy, Slurm runs job 3 on this node (State=MIXED)'),
    ('24.11', 'show-node-reboot-asap.txt', None, 'ubuntu2404-h200-01',
     'not run: busy, Slurm has the node allocated (State=MIXED+DRAIN+REBOOT_REQUESTED)'),
]


@pytest.mark.parametrize('version, show, squeue, node, why', BUSY)
def test_a_busy_node_never_runs_a_gate(version, show, squeue, node, why):
    assert P.where(ON, _state(version, show, node, squeue)) == {'run': False, 'why': why}
    # Not even where the operator declares it idle: Slurm knows better.
    assert P.where(dict(ON, nodeprep_readiness_node_idle=True), _state(version, show, node, squeue))['run'] is False


def test_a_job_on_an_idle_looking_node_keeps_the_gates_off():
    """squeue wins over the record: a job listed on the node (the record read a moment earlier) is a job."""
    state = _state('22.05', 'show-node-idle.txt', 'el9-b200-01', 'squeue-w-el9-tall.txt')
    assert P.where(ON, state) == {'run': False, 'why': 'not run: busy, Slurm runs job 1 on this node (State=IDLE)'}


FREE = [
    ('22.05', 'show-node-idle.txt', 'el9-b200-01', 'Slurm: idle, no job (State=IDLE)'),
    ('24.11', 'show-node-idle.txt', 'ubuntu2404-h200-01', 'Slurm: idle, no job (State=IDLE)'),
    # A rolling batch's verify step: drained with our reason, no job.
    ('24.11', 'show-node-drained-ours.txt', 'el9-b200-01',
     'Slurm: drained, no job (State=IDLE+DRAIN, reason nodeprep:cap1:drain)'),
    # An admin's drain: no job runs there either (the reason is not touched, only read).
    ('22.05', 'show-node-drained.txt', 'ubuntu2404-h200-01', None),
]


@pytest.mark.parametrize('version, show, node, why', FREE)
def test_an_idle_or_drained_node_runs_the_gates(version, show, node, why):
    found = P.where(ON, _state(version, show, node))
    assert found['run'] is True
    if why:
        assert found['why'] == why
    else:
        assert found['why'].startswith('Slurm: drained, no job (State=IDLE+DRAIN')


@pytest.mark.parametrize('show, state', [('show-node-maint.txt', 'IDLE+MAINTENANCE+RESERVED'),
                                         ('show-node-reserved.txt', 'IDLE+RESERVED'),
                                         ('show-node-powered-down.txt', 'IDLE+POWERED_DOWN'),
                                         ('show-node-unexpected-reboot.txt', 'DOWN')])
def test_other_states_skip_naming_them(show, state):
    assert P.where(ON, _state('24.11', show, 'ubuntu2404-h200-01')) == {
        'run': False, 'why': 'not run: Slurm shows the node neither idle nor drained (State={0})'.format(state)}


def test_without_a_scheduler_the_operator_decides():
    assert P.where(ON, None)['run'] is False
    assert 'nodeprep_readiness_node_idle is false' in P.where(ON, None)['why']
    assert P.where(dict(ON, nodeprep_readiness_node_idle=True), None) == {
        'run': True, 'why': 'no scheduler was asked; nodeprep_readiness_node_idle is true (the operator says it runs '
                            'no job)'}
    unknown = {'scheduler': 'slurm', 'record': None, 'jobs': [], 'error': None}
    assert P.where(ON, unknown)['why'].startswith('not run: Slurm does not know this node and')
    assert P.where(dict(ON, nodeprep_readiness_node_idle=True), unknown)['run'] is True


def test_an_unreadable_scheduler_runs_nothing():
    state = {'scheduler': 'slurm', 'record': None, 'jobs': [], 'error': 'scontrol show node -o failed (rc=1)'}
    assert P.where(dict(ON, nodeprep_readiness_node_idle=True), state) == {
        'run': False, 'why': 'not run: the scheduler could not be read, so the node may run a job: scontrol show node '
                             '-o failed (rc=1)'}


def test_off_by_default():
    assert P.where(dict(ON, nodeprep_readiness_performance=False), None)['why'] == (
        'not run: nodeprep_readiness_performance is false (they load every GPU for about a minute)')


# ---------------------------------------------------------------------------------------------------------------------
# the verdict on real captures


def _h100(count):
    return [{'index': i, 'name': 'NVIDIA H100 80GB HBM3'} for i in range(count)]


def _facts(gpus, **runs):
    return {'nvidia': {'gpus': gpus}, P.WHERE_FACT: {'run': True, 'why': 'Slurm: idle, no job (State=IDLE)'},
            P.FACT: dict((tool, F.perf_run(tool, text)) for tool, text in runs.items())}


A3MEGA = _read(FIXTURES, 'nccl-tests', 'h100-16gpu-2node_all_reduce_perf_a3mega-ztan.txt')
OLIVIA = _read(FIXTURES, 'nccl-tests', 'gh200-16gpu-4node-nccl-tests-2.17.9_all_reduce_perf-wrong_sigma2-olivia.txt')


def test_allreduce_below_the_h100_figure_fails_naming_it():
    """16 x H100 over two nodes (the a3mega capture) reach 297.9-338.8 GB/s from 1 GiB to 8 GiB: below Azure's 460."""
    settings = dict(ON, nodeprep_readiness_performance_thresholds={'allreduce_min_bytes': P.GIB,
                                                                   'allreduce_max_bytes': 8 * P.GIB})
    status, expected, observed = P.judge_allreduce(_facts(_h100(16), all_reduce_perf=A3MEGA), settings)
    assert status == 'fail'
    assert expected == ('all_reduce_perf over all 16 GPUs: mean bus bandwidth at 1 GiB to 8 GiB >= 460 GB/s '
                        '(h100-sxm: azure-nhc); no wrong or out-of-bounds value')
    assert observed == ('mean bus bandwidth 321.4 GB/s at 1 GiB to 8 GiB over 16 GPUs, below the 460 GB/s of h100-sxm '
                        '(azure-nhc)')


def test_allreduce_passes_at_a_site_figure():
    settings = dict(ON, nodeprep_readiness_performance_thresholds={'allreduce_min_bytes': P.GIB,
                                                                   'allreduce_max_bytes': 8 * P.GIB,
                                                                   'allreduce_busbw_gbps': 300})
    status, expected, observed = P.judge_allreduce(_facts(_h100(16), all_reduce_perf=A3MEGA), settings)
    assert (status, observed) == ('pass', 'mean bus bandwidth 321.4 GB/s at 1 GiB to 8 GiB over 16 GPUs; no wrong value')
    assert '>= 300 GB/s (h100-sxm: setting)' in expected
    # The nccl-tests summary of that run agrees with the mean of every row (both halves), as src/common.cu counts.
    parsed = P._nccl_tests.parse_nccl_tests(A3MEGA)
    halves = [half['busbw'] for row in parsed['rows'] for half in (row['out_of_place'], row['in_place'])]
    assert len(halves) == 62 and abs(sum(halves) / len(halves) - parsed['avg_busbw']) < 0.001


def test_allreduce_fails_on_wrong_values_and_an_incomplete_run():
    """The Olivia capture: #wrong above 0 from 8 MiB to 64 MiB, and the output ends at the last row."""
    gpus = [{'index': i, 'name': 'NVIDIA GH200 120GB'} for i in range(16)]
    settings = dict(ON, nodeprep_readiness_performance_thresholds={'allreduce_busbw_gbps': 1})
    status, _expected, observed = P.judge_allreduce(_facts(gpus, all_reduce_perf=OLIVIA), settings)
    assert status == 'fail'
    assert observed.startswith('#wrong above 0 at 2097152 B (out-of-place ')
    assert '8388608 B (out-of-place 763876, in-place 530181)' in observed
    assert 'the output ends before "# Out of bounds values" (incomplete run)' in observed
    assert 'no result row from 1 GiB to 16 GiB (rows: 1 B, ' in observed


def test_allreduce_on_fewer_gpus_than_the_node_has_fails():
    status, _expected, observed = P.judge_allreduce(_facts(_h100(8), all_reduce_perf=F.allreduce_output(
        4, 480.0, product='NVIDIA H100 80GB HBM3')), ON)
    assert (status, observed.split(';')[0]) == ('fail', 'ran on 4 of the 8 GPUs')


@pytest.mark.parametrize('run, observed', [
    ({'rc': 127, 'stdout': '', 'stderr': 'cannot run /opt/nodeprep/perf/bin/all_reduce_perf: No such file or directory'},
     'all_reduce_perf cannot be run: cannot run /opt/nodeprep/perf/bin/all_reduce_perf: No such file or directory; '
     'install it with role gpufleet.nodeprep.perf_tools with nodeprep_perf_tools_install: true, or the path of the '
     "site's binary in nodeprep_perf_tools_all_reduce_perf"),
    ({'rc': 124, 'stdout': '# nccl-tests version 2.17.9', 'stderr': '', 'timed_out': True},
     'all_reduce_perf did not finish within 600 s (/opt/nodeprep/perf/bin/all_reduce_perf); killed'),
    # What the GPU double prints when NCCL's library is missing (the dynamic loader's words).
    ({'rc': 127, 'stdout': '', 'stderr': 'all_reduce_perf: error while loading shared libraries: libnccl.so.2: cannot '
                                         'open shared object file: No such file or directory\n'},
     'all_reduce_perf cannot be run: all_reduce_perf: error while loading shared libraries: libnccl.so.2: cannot open '
     'shared object file: No such file or directory; install it with role gpufleet.nodeprep.perf_tools with '
     "nodeprep_perf_tools_install: true, or the path of the site's binary in nodeprep_perf_tools_all_reduce_perf"),
    ({'rc': 1, 'stdout': '', 'stderr': "Cuda failure common.cu: 'no CUDA-capable device is detected'\n"},
     "all_reduce_perf failed (rc=1): Cuda failure common.cu: 'no CUDA-capable device is detected'"),
])
def test_a_run_that_gave_nothing_to_judge_fails(run, observed):
    facts = _facts(_h100(8), all_reduce_perf='')
    facts[P.FACT]['all_reduce_perf'].update(run)
    assert P.judge_allreduce(facts, ON)[::2] == ('fail', observed)


AZURE_D2D = _read(FIXTURES, 'nvbandwidth', 'h100-8gpu-v0.4-drv570.133.20_d2d-read-ce_azurehpc-health-checks-fork.txt')
README_H2D = _read(FIXTURES, 'nvbandwidth', '8gpu_h2d-ce_nvbandwidth-readme.txt')


def test_nvbandwidth_on_the_azure_h100_capture():
    """The capture ran only the device-to-device read case: its cells (370.26-372.96 GB/s) pass Azure's 335 GB/s,
    the host<->device cases it did not run fail the gate."""
    status, expected, observed = P.judge_nvbandwidth(_facts(_h100(8), nvbandwidth=AZURE_D2D), ON)
    assert status == 'fail'
    assert expected == ('nvbandwidth, every cell: host_to_device_memcpy_ce >= 48 GB/s; device_to_host_memcpy_ce >= 48 '
                        'GB/s; device_to_device_memcpy_read_ce >= 335 GB/s (h100-sxm: azure-nhc)')
    assert observed == ('host_to_device_memcpy_ce did not run; device_to_host_memcpy_ce did not run; '
                        'device_to_device_memcpy_read_ce min 370.3 GB/s (GPU 0 -> GPU 6)')


def test_nvbandwidth_cells_below_the_figure_fail_naming_each_gpu():
    """The README's host-to-device row (25.94-26.19 GB/s) against the H100 figure of 48 GB/s: every GPU named."""
    # The README's excerpt stops at the matrix; nvbandwidth prints the SUM line after it (output.cpp), which closes the
    # case: without it the case counts as cut off (status Running), and that fails too.
    head = AZURE_D2D.split('Running device_to_device')[0]
    cut = P.judge_nvbandwidth(_facts(_h100(8), nvbandwidth=head + README_H2D), ON)
    assert cut[2].startswith('host_to_device_memcpy_ce: Running; ')
    text = head + README_H2D.rstrip('\n') + '\n\nSUM host_to_device_memcpy_ce 208.51\n'
    status, _expected, observed = P.judge_nvbandwidth(_facts(_h100(8), nvbandwidth=text), ON)
    assert status == 'fail'
    assert observed.startswith('host_to_device_memcpy_ce: 8 of 8 cells below 48 GB/s: GPU 0 ')
    assert 'device_to_host_memcpy_ce did not run' in observed


def test_no_figure_for_the_model_skips_saying_what_was_measured():
    gpus = [{'index': i, 'name': 'NVIDIA B200'} for i in range(8)]
    status, expected, observed = P.judge_nvbandwidth(
        _facts(gpus, nvbandwidth=F.nvbandwidth_output(8, 55.0, 55.5, 750.0)), ON)
    assert status == 'skip'
    assert expected.endswith('(no figure for NVIDIA B200: nodeprep_readiness_performance_thresholds)')
    assert observed.endswith('no figure to hold them against')


@pytest.mark.parametrize('value, message', [
    ('fast', 'nodeprep_readiness_performance_thresholds=\'fast\': a dictionary of thresholds'),
    ({'busbw': 400}, 'nodeprep_readiness_performance_thresholds: unknown keys busbw; allowed: allreduce_busbw_gbps'),
    ({'allreduce_busbw_gbps': 0}, 'allreduce_busbw_gbps=0: a threshold is a number above 0'),
    ({'allreduce_max_bytes': 32 * P.GIB}, 'allreduce_max_bytes=34359738368: the gate runs all_reduce_perf from'),
    ({'allreduce_min_bytes': 8 * P.GIB, 'allreduce_max_bytes': 2 * P.GIB}, 'allreduce_min_bytes 8589934592 is above'),
])
def test_bad_overrides_are_refused(value, message):
    with pytest.raises(P.PerfGateError) as info:
        P.check_overrides(value)
    assert message in str(info.value)


def test_the_argv_the_gather_runs():
    assert _perf_cli.allreduce_argv('/opt/nodeprep/perf/bin/all_reduce_perf', 8) == [
        '/opt/nodeprep/perf/bin/all_reduce_perf', '-b', '1G', '-e', '16G', '-f', '2', '-g', '8', '-c', '1']
    assert _perf_cli.nvbandwidth_argv('/x/nvbandwidth') == [
        '/x/nvbandwidth', '-t', 'host_to_device_memcpy_ce', 'device_to_host_memcpy_ce', 'device_to_device_memcpy_read_ce']


def test_the_builders_print_the_layout_of_the_captures():
    """The converged node's outputs (test_readiness_facts) parse as the real captures do."""
    built = P._nccl_tests.parse_nccl_tests(F.allreduce_output(8, 820.0))
    real = P._nccl_tests.parse_nccl_tests(OLIVIA)
    assert sorted(built['params']) == sorted(real['params'])
    assert sorted(built['devices'][0]) == sorted(real['devices'][0])
    assert built['version'] == real['version'] == '2.17.9'
    assert sorted(built['rows'][0]['in_place']) == sorted(real['rows'][0]['in_place'])
    nvb = P._nvbandwidth.parse_nvbandwidth(F.nvbandwidth_output(8, 55.0, 55.5, 750.0))
    real = P._nvbandwidth.parse_nvbandwidth(AZURE_D2D)
    assert [c['name'] for c in nvb['testcases']] == list(_perf_cli.NVB_CASES)
    case = P._nvbandwidth.testcase(nvb, 'device_to_device_memcpy_read_ce')
    assert (case['column_labels'], case['row_labels']) == (real['testcases'][0]['column_labels'],
                                                           real['testcases'][0]['row_labels'])
