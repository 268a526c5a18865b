# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The statistics and result files of `make bench` (bench/fleetstats.py) and the bench callback's counting rules.

Only the arithmetic and the files: no timing is asserted anywhere (the bench is not a test).
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _load(name, *parts):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, *parts))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fs = _load('fleetstats', 'bench', 'fleetstats.py')
counter = _load('bench_counter', 'bench', 'callback_plugins', 'bench_counter.py')


@pytest.mark.parametrize('values, expected', [
    ([3.0], 3.0),
    ([5.0, 1.0, 3.0], 3.0),
    ([4.0, 1.0, 3.0, 2.0], 2.5),
    ([None, 2.0, None, 4.0], 3.0),
    ([], None),
    ([None], None),
])
def test_median(values, expected):
    assert fs.median(values) == expected


def test_summarize_spread_is_max_minus_min():
    assert fs.summarize([10.0, 12.5, 11.0]) == {'median': 11.0, 'min': 10.0, 'max': 12.5, 'spread': 2.5, 'n': 3}
    assert fs.summarize([7.0]) == {'median': 7.0, 'min': 7.0, 'max': 7.0, 'spread': 0.0, 'n': 1}
    assert fs.summarize([None]) == {'median': None, 'min': None, 'max': None, 'spread': None, 'n': 0}


def test_ratios_pair_samples_and_skip_missing_or_zero():
    assert fs.ratios([10.0, 9.0, 8.0, 5.0], [2.0, 3.0, 0, None]) == [5.0, 3.0]


def test_count_deltas_only_hosts_known_before_and_after():
    before = {'a': 10, 'b': None, 'c': 4}
    after = {'a': 11, 'b': 3, 'c': 4, 'd': 2}
    assert fs.count_deltas(before, after) == {'a': 1, 'c': 0}
    assert fs.count_deltas({}, {'a': None}) == {}


def test_per_host_counts_is_the_median_over_hosts():
    data = {'hosts': {'a': {'module_execs': 13, 'skipped': 90}, 'b': {'module_execs': 11, 'skipped': 92},
                      'c': {'module_execs': 12, 'skipped': 91}}}
    assert fs.per_host_counts(data) == 12
    assert fs.per_host_counts(data, 'skipped') == 91
    assert fs.per_host_counts(None) is None


def _run():
    return fs.build_run(4, {
        'noop_site_s': [100.0, 104.0, 103.0],
        'gather_s': [3.0, 3.2, 3.1],
        'module_execs_per_host': [13, 13, 13],
        'nvidia_smi_calls_per_gather': [],
        'baseline_noop_s': [32.0, 30.0, 33.0],
    }, notes=['noisy machine'])


def test_build_run_medians_spreads_and_derived_ratios():
    run = _run()
    assert fs.check_run(run) == []
    assert run['nodes'] == 4
    assert run['noop_site_s'] == 103.0
    assert run['noop_site_s_spread'] == 4.0
    assert run['noop_site_s_min'] == 100.0 and run['noop_site_s_max'] == 104.0
    assert run['gather_s'] == 3.1
    # ratio: per-repeat noop/gather, then the median of those (100/3, 104/3.2, 103/3.1)
    assert run['ratio'] == round(sorted([100 / 3.0, 104 / 3.2, 103 / 3.1])[1], 3)
    assert run['baseline_over_site'] == round(sorted([32 / 100.0, 30 / 104.0, 33 / 103.0])[1], 3)
    assert run['nvidia_smi_calls_per_gather'] is None and run['nvidia_smi_calls_per_gather_n'] == 0
    assert run['notes'] == ['noisy machine']


def test_check_run_names_missing_keys():
    assert fs.check_run({'nodes': 4, 'gather_s': 1.0}) == [
        'noop_site_s', 'ratio', 'module_execs_per_host', 'nvidia_smi_calls_per_gather', 'baseline_noop_s']


def test_table_rows_leave_out_unmeasured_and_format_units():
    rows = fs.table_rows([_run()])
    labels = [r[1] for r in rows]
    assert 'nvidia-smi calls per host per gather' not in labels
    assert ('4 nodes', 'no-op site.yml', '103.00 s', '4.00 s', '3') in rows
    assert ('4 nodes', 'remote module executions per host (no-op site)', '13', '0', '3') in rows
    text = fs.format_table([_run()])
    assert text.splitlines()[0].split() == ['fleet', 'measure', 'median', 'spread', 'n']
    assert len(text.splitlines()) == len(rows) + 2


def _counter():
    return {'hosts': {'a': {'module_execs': 2, 'skipped': 3, 'controller_only': 1,
                            'actions': {'gpufleet.nodeprep.gpu_node_facts': 1, 'service_facts': 1}},
                      'b': {'module_execs': 2, 'skipped': 3, 'controller_only': 1,
                            'actions': {'gpufleet.nodeprep.gpu_node_facts': 1, 'service_facts': 1}}},
            'tasks': [
                {'name': 'gather', 'action': 'gpufleet.nodeprep.gpu_node_facts', 'ran': {'a': 1, 'b': 1},
                 'skipped': [], 'seconds': {'a': 1.0, 'b': 1.5}, 'total_s': 2.5},
                {'name': 'skip me', 'action': 'ansible.builtin.copy', 'ran': {}, 'skipped': ['a', 'b'],
                 'seconds': {'a': 0.25, 'b': 0.25}, 'total_s': 0.5},
                {'name': 'services', 'action': 'ansible.builtin.service_facts', 'ran': {'a': 1, 'b': 1},
                 'skipped': [], 'seconds': {'a': 2.0, 'b': 2.0}, 'total_s': 4.0}]}


def test_profile_sums_skipped_and_ran_time_and_orders_slowest_first():
    prof = fs.profile(_counter(), top=2)
    assert prof['hosts'] == 2 and prof['task_slots'] == 3
    assert prof['module_execs_per_host'] == 2 and prof['skipped_per_host'] == 3
    assert prof['skipped_s'] == 0.5 and prof['ran_s'] == 6.5
    assert [t['name'] for t in prof['slowest']] == ['services', 'gather']
    assert prof['actions_per_host'] == [('gpufleet.nodeprep.gpu_node_facts', 1), ('service_facts', 1)]


def test_write_results_writes_json_and_markdown(tmp_path):
    run = _run()
    run['profile'] = fs.profile(_counter())
    doc = {'conditions': {'repeats': 3, 'host': '2 CPUs'}, 'runs': [run], 'skipped_sizes': []}
    json_path, md_path = fs.write_results(doc, str(tmp_path / 'r' / 'latest.json'), str(tmp_path / 'r' / 'latest.md'))
    with open(json_path) as handle:
        back = json.load(handle)
    assert back['runs'][0]['noop_site_s'] == 103.0
    assert fs.check_run(back['runs'][0]) == []
    with open(md_path) as handle:
        md = handle.read()
    assert '| 4 nodes | no-op site.yml | 103.00 s | 4.00 s | 3 |' in md
    assert '- repeats: 3' in md
    assert '| services | ansible.builtin.service_facts | 2 | 0 | 4.00 |' in md
    assert '- noisy machine' in md


@pytest.mark.parametrize('action, delegated, expected', [
    ('ansible.builtin.set_fact', False, False),
    ('ansible.legacy.assert', False, False),
    ('include_tasks', False, False),
    ('ansible.builtin.validate_argument_spec', False, False),
    ('ansible.builtin.service_facts', False, True),
    ('gpufleet.nodeprep.gpu_node_facts', False, True),
    ('gpufleet.nodeprep.role_arguments', False, False),
    ('ansible.builtin.template', False, True),
    ('ansible.builtin.command', True, False),
])
def test_callback_counts_only_actions_that_run_a_module_on_the_node(action, delegated, expected):
    assert counter.runs_module(action, delegated) is expected


# The shape of `ansible all -m raw -a '...wc -l...'` with the ansible.posix.json stdout callback (one play, one task).
CALL_LOG_JSON = json.dumps({'plays': [{'play': {'name': 'Ansible Ad-Hoc'}, 'tasks': [{'task': {'name': 'raw'}, 'hosts': {
    'el9-b200-01': {'changed': True, 'rc': 0, 'stdout': '45\r\n', 'stdout_lines': ['45']},
    'el8-h100-01': {'changed': True, 'rc': 0, 'stdout': 'absent\r\n', 'stdout_lines': ['absent']},
    'el10-b200-01': {'unreachable': True, 'msg': 'ssh: connect to host'},
}}]}], 'stats': {}})


def test_call_log_counts_from_the_json_callback():
    assert fs.call_log_counts(CALL_LOG_JSON) == {'el9-b200-01': 45, 'el8-h100-01': None, 'el10-b200-01': None}
    assert fs.call_log_counts('not json') == {}


def test_count_deltas_skip_unknown_and_emptied_logs():
    before = {'a': 10, 'b': None, 'c': 30, 'd': 5}
    after = {'a': 11, 'b': 4, 'c': 2, 'd': 5}
    assert fs.count_deltas(before, after) == {'a': 1, 'd': 0}


def test_controller_cpu_per_node_is_site_minus_gather_over_nodes():
    run = fs.build_run(4, {'controller_cpu_s': [7.1, 7.5, 6.9], 'controller_cpu_gather_s': [1.3, 1.5, 1.3]})
    # per repeat: (7.1-1.3)/4 = 1.45, (7.5-1.5)/4 = 1.5, (6.9-1.3)/4 = 1.4; the median is 1.45
    assert run['controller_cpu_per_node_s'] == 1.45
    assert run['controller_cpu_per_node_s_n'] == 3
    assert run['controller_cpu_s'] == 7.1 and run['controller_cpu_gather_s'] == 1.3
