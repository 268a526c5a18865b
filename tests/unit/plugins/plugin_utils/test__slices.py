# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/plugin_utils/_slices.py: a run's identity from AWX's variables, where a slice writes, and the merge of the
slices' report.json and run-summary.json into exactly the files an unsliced run of the same hosts writes."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import datetime
import json
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_report as rr
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_summary as S
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _slices
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.plugin_utils import report_fleet

NOW = datetime.datetime(2026, 12, 7, 10, 15, 0, tzinfo=datetime.timezone.utc)


# ------------------------------------------------------------------------------------------------- identity

@pytest.mark.parametrize('values, sliced, run_id, source, slice_id', [
    # plain ansible-playbook: the time
    ({}, False, '20261207T101500Z', 'time', None),
    # an AWX job that is not in a workflow: its own id
    ({'awx_job_id': 812, 'tower_job_id': 812}, False, '812', 'awx_job_id', None),
    # a slice of a sliced job: the workflow job's id (shared), its own id as the slice
    ({'awx_job_id': 4712, 'awx_workflow_job_id': 4711, 'tower_job_id': 4712, 'tower_workflow_job_id': 4711}, True,
     '4711', 'awx_workflow_job_id', '4712'),
    # Tower's names only (older controllers carry both)
    ({'tower_job_id': 7, 'tower_workflow_job_id': 6}, True, '6', 'tower_workflow_job_id', '7'),
    # given ids win
    ({'nodeprep_run_id': 'hourly-0900', 'nodeprep_slice_id': 'b', 'awx_job_id': 1, 'awx_workflow_job_id': 2}, True,
     'hourly-0900', 'nodeprep_run_id', 'b'),
    # an empty nodeprep_run_id is unset
    ({'nodeprep_run_id': '', 'awx_workflow_job_id': 9, 'awx_job_id': 10}, False, '9', 'awx_workflow_job_id', None),
])
def test_identity(values, sliced, run_id, source, slice_id):
    ident = _slices.identity(values, sliced=sliced, now=NOW)
    assert ident == {'run_id': run_id, 'run_id_from': source, 'slice_id': slice_id, 'sliced': sliced}


@pytest.mark.parametrize('values, words', [
    ({'awx_job_id': 5}, 'share no run id (from awx_job_id)'),
    ({}, 'share no run id (none given)'),
    ({'nodeprep_run_id': 'r1'}, 'this slice has no id'),
    ({'nodeprep_run_id': '../etc', 'nodeprep_slice_id': 'a'}, "nodeprep_run_id='../etc' is not allowed"),
    ({'nodeprep_run_id': 'r1', 'nodeprep_slice_id': 'a/b'}, "nodeprep_slice_id='a/b' is not allowed"),
])
def test_a_slice_refuses_ids_it_cannot_use(values, words):
    with pytest.raises(_slices.SliceError) as caught:
        _slices.identity(values, sliced=True, now=NOW)
    assert words in str(caught.value)


def test_output_dir():
    ident = _slices.identity({'awx_job_id': 12, 'awx_workflow_job_id': 11}, sliced=True)
    assert _slices.output_dir('/srv/reports', ident) == '/srv/reports/slices/11/12'
    assert _slices.output_dir('/srv/reports', dict(ident, sliced=False)) == '/srv/reports'


class Templar(object):
    """Templates nothing (the values given are final); records what it was asked."""

    def __init__(self):
        self.asked = []

    def template(self, value):
        self.asked.append(value)
        return value


def test_run_identity_types_the_variables_once():
    # -e nodeprep_sliced=false is the string 'false': it must mean false
    ident = _slices.run_identity(Templar(), {'nodeprep_sliced': 'false', 'awx_job_id': 3}, now=NOW)
    assert ident['sliced'] is False and ident['run_id'] == '3'
    ident = _slices.run_identity(Templar(), {'nodeprep_sliced': 'yes', 'awx_job_id': 3, 'awx_workflow_job_id': 2})
    assert ident['sliced'] is True and (ident['run_id'], ident['slice_id']) == ('2', '3')
    with pytest.raises(_slices.SliceError) as caught:
        _slices.run_identity(Templar(), {'nodeprep_sliced': 'maybe'})
    assert "nodeprep_sliced='maybe'" in str(caught.value)


def test_a_slice_of_an_awx_sliced_job_is_a_slice_without_nodeprep_sliced():
    """AWX names the workflow job of a sliced launch after the job template (the rolling plan's rule,
    rules/_rolling.sliced_job): such a job is a slice even when the template forgot nodeprep_sliced, so that its
    slices never write over each other's report; a job template inside a workflow of another name is not."""
    slice_vars = {'awx_job_id': 31, 'awx_workflow_job_id': 30, 'awx_workflow_job_name': 'nodeprep-site',
                  'awx_job_template_name': 'nodeprep-site'}
    ident = _slices.run_identity(Templar(), slice_vars)
    assert (ident['sliced'], ident['run_id'], ident['slice_id']) == (True, '30', '31')
    in_workflow = dict(slice_vars, awx_workflow_job_name='nodeprep-hourly')
    ident = _slices.run_identity(Templar(), in_workflow)
    assert (ident['sliced'], ident['run_id'], ident['slice_id']) == (False, '30', None)
    # the tower_ twins say the same
    ident = _slices.run_identity(Templar(), dict((key.replace('awx_', 'tower_'), value)
                                                 for key, value in slice_vars.items()))
    assert (ident['sliced'], ident['run_id'], ident['slice_id']) == (True, '30', '31')


def test_stats_every_slice_leaves_the_same_run_id():
    ident = _slices.identity({'awx_job_id': 12, 'awx_workflow_job_id': 11}, sliced=True)
    assert _slices.stats(ident) == {'data': {'nodeprep_run_id': '11'}, 'per_host': False, 'aggregate': True}


# ------------------------------------------------------------------------------------------------- the merge

def awx_split(hosts, count):
    """AWX's slices: hosts ordered by name, slice k gets sorted[k-1::count] (inventory.py get_sliced_hosts)."""
    ordered = sorted(hosts)
    return [ordered[k::count] for k in range(min(count, len(ordered)))]


def fleet_results():
    """A 12-host fleet of every kind of result, in an inventory order that is not the names' order."""
    v = report_fleet.variants()
    kinds = ['converged', 'gpu_lost', 'xid_warn', 'unreachable', 'gather_failed', 'shm_full', 'gro_on',
             'persistenced_off', 'fresh', 'converged', 'converged', 'xid_warn']
    hosts = ['gpu-b{0:02d}'.format(i) for i in range(6)] + ['gpu-a{0:02d}'.format(i) for i in range(6)]
    return hosts, dict((host, v[kind]) for host, kind in zip(hosts, kinds))


def rendered(report):
    return dict((name, render(report)) for name, render in rr.FILES)


@pytest.mark.parametrize('count', [2, 3, 5])
def test_merged_report_files_equal_the_unsliced_report(count):
    hosts, results = fleet_results()
    unsliced = rr.build_report(hosts, results, '2026-12-07T10:20:00Z')
    reports = {}
    for index, share in enumerate(awx_split(hosts, count)):
        # each slice's play has its hosts in the inventory's order; its report goes through JSON (report.json)
        mine = [host for host in hosts if host in share]
        report = rr.build_report(mine, dict((h, results[h]) for h in mine),
                                 '2026-12-07T10:1{0}:00Z'.format(9 if index == 0 else index))
        reports[str(4712 + index)] = json.loads(rr.render_json(report))
    merged_hosts, merged_results, generated, missing = _slices.merge_reports(reports, hosts, '4711')
    assert (merged_hosts, missing) == (hosts, {})
    assert generated == '2026-12-07T10:19:00Z'   # the latest slice's
    merged = rr.build_report(merged_hosts, merged_results, '2026-12-07T10:20:00Z', unreachable=missing)
    assert rendered(merged) == rendered(unsliced)


def test_without_the_inventory_the_hosts_are_in_name_order():
    hosts, results = fleet_results()
    reports = dict((str(i), json.loads(rr.render_json(rr.build_report(share, dict((h, results[h]) for h in share),
                                                                      'g'))))
                   for i, share in enumerate(awx_split(hosts, 2)))
    merged_hosts, _results, _generated, _missing = _slices.merge_reports(reports, [], 'r')
    assert merged_hosts == sorted(hosts)


def test_a_host_no_slice_reported_is_not_checked_and_says_why():
    hosts, results = fleet_results()
    shares = awx_split(hosts, 3)
    reports = dict((str(i), json.loads(rr.render_json(rr.build_report(share, dict((h, results[h]) for h in share),
                                                                      'g'))))
                   for i, share in enumerate(shares) if i != 1)   # slice 2 failed before its report
    merged_hosts, merged_results, generated, missing = _slices.merge_reports(reports, hosts, '4711')
    assert sorted(missing) == sorted(shares[1])
    report = rr.build_report(merged_hosts, merged_results, generated, unreachable=missing)
    for host in shares[1]:
        assert report['hosts'][host]['status'] == 'unreachable'
        assert 'no slice of run 4711 reported this host' in report['hosts'][host]['msg']
    assert report['exit_status'] == 2


def test_a_host_in_two_slices_is_refused():
    hosts, results = fleet_results()
    one = json.loads(rr.render_json(rr.build_report(hosts[:3], results, 'g')))
    two = json.loads(rr.render_json(rr.build_report(hosts[2:5], results, 'g')))
    with pytest.raises(_slices.SliceError) as caught:
        _slices.merge_reports({'7': one, '8': two}, hosts, '6')
    assert str(caught.value) == 'host gpu-b02 is in the reports of slices 7 and 8 of run 6: slices never share a host'


def test_a_file_that_is_not_a_report_is_refused():
    with pytest.raises(_slices.SliceError) as caught:
        _slices.merge_reports({'7': {'summary': {}}}, [], '6')
    assert str(caught.value) == '7/report.json: not a readiness report (no "hosts")'


def plan(reasons=(), reboot=(), allowed=False, gpu_skip=None):
    return {'reasons': list(reasons), 'reboot': {'needed': bool(reboot), 'why': list(reboot), 'allowed': allowed},
            'gpu_skip': gpu_skip}


def site_nodes():
    roles = ('kernel', 'nvidia_driver', 'shm')
    hung = S.error_of('gather', 'Gather the node and plan every role', {
        'failed': True, 'nodeprep_unreachable': True, 'msg': 'Connection timed out during banner exchange',
        'limit': {'limit': 'ssh_connect', 'variable': 'ansible_ssh_timeout', 'seconds': 10,
                  'what': 'the SSH connection'}})
    nodes = {
        'n1': {'record': S.record({'shm': plan(['/dev/shm is 32G, want 64G'])}, roles), 'errors': {}},
        'n2': {'record': S.record({'kernel': plan()}, roles), 'errors': {}},
        'n3': {'record': {}, 'errors': {'gather': hung}},
        'n4': {'record': S.record({'nvidia_driver': plan(['driver: not installed'], ['nouveau'])}, roles),
               'errors': {}, 'reboot_required': True, 'reboot_reasons': ['nouveau is loaded']},
        'n5': {'record': S.record({'kernel': plan(gpu_skip='not a GPU node')}, roles), 'errors': {}},
        'n6': {'record': S.record({'kernel': plan()}, roles), 'errors': {},
               'timed_out': [{'command': '/usr/bin/systemctl show x', 'seconds': 60, 'option': 'command_timeout'}]},
        'n0': {'record': {}, 'errors': {}},   # unreachable before anything was recorded
    }
    return ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n0'], nodes, roles


@pytest.mark.parametrize('count', [2, 3])
def test_merged_summary_equals_the_unsliced_summary(count):
    hosts, nodes, roles = site_nodes()
    alive = [h for h in hosts if h not in ('n3', 'n0')]
    unsliced = S.build(hosts, alive, nodes, roles=roles, run_id='812')
    summaries = {}
    for index, share in enumerate(awx_split(hosts, count)):
        mine = [h for h in hosts if h in share]
        summary = S.build(mine, [h for h in alive if h in mine], nodes, roles=roles, run_id='4711')
        summaries[str(index)] = json.loads(json.dumps(summary))
    merged = _slices.merge_summaries(summaries, hosts, '4711')
    assert merged['run_id'] == '4711'
    assert dict(merged, run_id='812') == unsliced
    assert merged['limits'] == {
        'n3': [{'limit': 'ssh_connect', 'variable': 'ansible_ssh_timeout', 'seconds': 10,
                'what': 'the SSH connection'}],
        'n6': [{'limit': 'command', 'variable': 'nodeprep_command_timeout', 'seconds': 60,
                'what': '/usr/bin/systemctl show x'}]}


def test_a_host_no_slice_summarised_is_failed_and_says_why():
    hosts, nodes, roles = site_nodes()
    summary = S.build(['n1', 'n2'], ['n1', 'n2'], nodes, roles=roles, run_id='4711')
    merged = _slices.merge_summaries({'1': summary}, ['n1', 'n2', 'n4'], '4711')
    assert merged['failed']['n4']['msg'] == ('no summary: no slice of run 4711 named this host (its slice failed '
                                             'before the summary)')
    assert merged['counts'] == {'changed': 1, 'reboot': 0, 'failed': 1, 'no_gpu': 0, 'limits': 0, 'unchanged': 1}
    assert merged['hosts'] == 3


def test_slices_in_check_mode_and_not_are_refused():
    hosts, nodes, roles = site_nodes()
    one = S.build(['n1'], ['n1'], nodes, roles=roles, check_mode=True)
    two = S.build(['n2'], ['n2'], nodes, roles=roles)
    with pytest.raises(_slices.SliceError) as caught:
        _slices.merge_summaries({'a': one, 'b': two}, [], '9')
    assert str(caught.value) == 'run 9: some slices ran in check mode and some did not: a=True, b=False'


def test_read_slices_and_runs_found(tmp_path):
    base = str(tmp_path)
    for run, part in (('11', '12'), ('11', '13'), ('21', '22')):
        _slices.write_atomic(os.path.join(base, 'slices', run, part, 'report.json'), '{"n": %s}\n' % part)
    os.makedirs(os.path.join(base, 'slices', '11', 'not an id'))
    assert _slices.runs_found(base) == ['11', '21']
    assert _slices.read_slices(base, '11', 'report.json', lambda p: json.load(open(p))) == {
        '12': {'n': 12}, '13': {'n': 13}}
    assert _slices.read_slices(base, '99', 'report.json', json.load) == {}
    with pytest.raises(_slices.SliceError):
        _slices.read_slices(base, '../x', 'report.json', json.load)
    assert not [name for name in os.listdir(os.path.join(base, 'slices', '11', '12')) if name.startswith('.')]


def test_write_atomic_writes_a_nodes_undecodable_bytes_back_as_they_were(tmp_path):
    # Bytes written by hand: 0xff is no UTF-8; a node's output decoded with surrogateescape holds it as U+DCFF.
    path = _slices.write_atomic(os.path.join(str(tmp_path), 'new', 'report.txt'), 'gpu0 \udcff ok\n')
    with open(path, 'rb') as f:
        assert f.read() == b'gpu0 \xff ok\n'
    assert oct(os.stat(path).st_mode & 0o777) == '0o644'
    assert os.listdir(os.path.dirname(path)) == ['report.txt']
