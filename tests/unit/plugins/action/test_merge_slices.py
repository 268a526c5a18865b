# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A sliced run through the real actions: the slices' readiness_report and run_summary write their parts where a
slice writes, merge_slices writes the files an unsliced run of the same hosts writes."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.action import merge_slices
from ansible_collections.gpufleet.nodeprep.plugins.action import readiness_report
from ansible_collections.gpufleet.nodeprep.plugins.action import run_summary
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_summary as S
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.plugin_utils import report_fleet

HOSTS = ['gpu-b02', 'gpu-a01', 'gpu-b01', 'gpu-a02', 'gpu-a03']
KINDS = ['converged', 'gpu_lost', 'unreachable', 'xid_warn', 'gather_failed']
FILES = ['report.json', 'junit.xml', 'report.html', 'report.txt', 'readiness.prom', 'exit-status',
         'run-summary.json']


def action(cls, args):
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    return cls.ActionModule(task, MagicMock(), PlayContext(), loader=DataLoader(),
                            templar=Templar(loader=DataLoader()), shared_loader_obj=None)


def play_vars(hosts, extra):
    variants = report_fleet.variants()
    record = S.record({'shm': {'reasons': [], 'reboot': {}, 'gpu_skip': None}}, ['shm'])
    hostvars = dict((host, {'nodeprep_readiness': variants[kind],
                            'ansible_facts': {'nodeprep_run_record': record}})
                    for host, kind in zip(HOSTS, KINDS) if host in hosts)
    return dict(extra, ansible_play_hosts_all=list(hosts), ansible_play_hosts=list(hosts), hostvars=hostvars)


def run_once(hosts, extra):
    """What one run (or one slice) writes: its readiness report and its run summary."""
    # the role gives the report step its directory (report.yml: dest is nodeprep_readiness_report_dir)
    report = action(readiness_report, {'dest': extra['nodeprep_readiness_report_dir']}).run(
        task_vars=play_vars(hosts, extra))
    summary = action(run_summary, {}).run(task_vars=play_vars(hosts, extra))
    return report, summary


def normalized(name, text):
    if name in ('report.json', 'run-summary.json'):
        data = json.loads(text)
        data.pop('generated', None)
        data.pop('run_id', None)
        return data
    if name == 'junit.xml':
        return re.sub(r' timestamp="[^"]*"', '', text)
    if name == 'readiness.prom':
        return [line for line in text.splitlines() if not line.startswith('nodeprep_readiness_last_run_timestamp')]
    if name == 'report.html':
        return re.sub(r'Generated [0-9TZ:-]+ ', '', text)
    return text


def read(folder, name):
    with open(os.path.join(folder, name)) as handle:
        return handle.read()


def test_a_sliced_run_merges_into_the_unsliced_files(tmp_path):
    unsliced, sliced = str(tmp_path / 'unsliced'), str(tmp_path / 'sliced')
    report, summary = run_once(HOSTS, {'nodeprep_readiness_report_dir': unsliced, 'awx_job_id': 900})
    assert report['run_id'] == summary['run_id'] == '900'
    # AWX's slices of HOSTS (ordered by name, round robin): each a job of workflow 4711
    shares = [['gpu-a01', 'gpu-a03', 'gpu-b02'], ['gpu-a02', 'gpu-b01']]
    for index, share in enumerate(shares):
        mine = [host for host in HOSTS if host in share]
        variables = {'nodeprep_readiness_report_dir': sliced, 'nodeprep_sliced': 'true',
                     'nodeprep_readiness_prometheus_textfile': str(tmp_path / 'never.prom'),
                     'awx_job_id': 4712 + index, 'awx_workflow_job_id': 4711}
        report, summary = run_once(mine, variables)
        part = os.path.join(sliced, 'slices', '4711', str(4712 + index))
        assert report['dest'] == part and summary['path'] == os.path.join(part, 'run-summary.json')
        assert report['ansible_stats'] == summary['ansible_stats'] == {
            'data': {'nodeprep_run_id': '4711'}, 'per_host': False, 'aggregate': True}
    assert not os.path.exists(str(tmp_path / 'never.prom'))   # a slice writes no textfile: the merge does
    assert not os.path.exists(os.path.join(sliced, 'report.json'))
    # the merge: another node of the workflow (its own AWX ids are not the run's), the run id from the artifacts
    merged = action(merge_slices, {'hosts': HOSTS}).run(task_vars={
        'nodeprep_readiness_report_dir': sliced, 'nodeprep_run_id': '4711', 'awx_job_id': 4800,
        'awx_workflow_job_id': 4700, 'nodeprep_readiness_prometheus_textfile': str(tmp_path / 'fleet.prom')})
    assert (merged['run_id'], merged['slices']) == ('4711', ['4712', '4713'])
    assert merged['exit_status'] == 2 and merged['summary']['hosts'] == 5
    for name in FILES:
        assert normalized(name, read(sliced, name)) == normalized(name, read(unsliced, name)), name
    assert json.loads(read(sliced, 'report.json'))['run_id'] == json.loads(read(sliced, 'run-summary.json'))[
        'run_id'] == '4711'
    assert read(str(tmp_path), 'fleet.prom') == read(sliced, 'readiness.prom')
    assert not os.path.exists(os.path.join(sliced, 'slices', '4711'))   # merged parts are removed


def test_keep_leaves_the_parts(tmp_path):
    folder = str(tmp_path)
    run_once(HOSTS[:2], {'nodeprep_readiness_report_dir': folder, 'nodeprep_sliced': True,
                         'nodeprep_run_id': 'hourly', 'nodeprep_slice_id': 'a'})
    result = action(merge_slices, {'run_id': 'hourly', 'keep': True}).run(task_vars={
        'nodeprep_readiness_report_dir': folder})
    assert result['slices'] == ['a']
    assert os.path.isfile(os.path.join(folder, 'slices', 'hourly', 'a', 'report.json'))


@pytest.mark.parametrize('args, variables, words', [
    ({}, {}, 'run_id: no run id given (nodeprep_run_id; in an AWX workflow the slices leave it as the artifact '
             'nodeprep_run_id for the next node); runs with slices in {dest}: 4711'),
    ({'run_id': '99'}, {}, 'run 99: no slice wrote report.json or run-summary.json under {dest}/slices/99; runs with '
                           'slices there: 4711'),
    ({'run_id': '../4711'}, {}, "run_id='../4711' is not allowed"),
])
def test_a_merge_without_its_run_fails_naming_what_is_there(tmp_path, args, variables, words):
    folder = str(tmp_path)
    run_once(HOSTS[:1], {'nodeprep_readiness_report_dir': folder, 'nodeprep_sliced': True, 'awx_job_id': 4712,
                         'awx_workflow_job_id': 4711})
    with pytest.raises(AnsibleActionFail) as caught:
        action(merge_slices, args).run(task_vars=dict(variables, nodeprep_readiness_report_dir=folder))
    assert words.format(dest=folder) in str(caught.value)


def test_a_slice_without_a_shared_run_id_is_refused(tmp_path):
    with pytest.raises(AnsibleActionFail) as caught:
        run_once(HOSTS[:1], {'nodeprep_readiness_report_dir': str(tmp_path), 'nodeprep_sliced': True,
                             'awx_job_id': 4712})
    assert 'nodeprep_sliced is true but the slices of this run share no run id (from awx_job_id)' in str(caught.value)


def test_leave_ends_the_host_as_it_was_lost():
    lost = action(run_summary, {'leave': {'role': 'gather', 'msg': 'Connection timed out', 'unreachable': True}})
    assert lost.run(task_vars={}) == {'changed': False, 'unreachable': True, 'msg': 'gather: Connection timed out'}
    failed = action(run_summary, {'leave': {'role': 'gather', 'msg': 'Timed out after 30 second(s).',
                                            'unreachable': False}})
    assert failed.run(task_vars={}) == {'changed': False, 'failed': True,
                                        'msg': 'gather: Timed out after 30 second(s).'}
