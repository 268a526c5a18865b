# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""`make bench-scale`'s parts that can be checked without a fleet: the recording, the replay inventory, the no-op
verdict, the per-host arithmetic, the profile grouping, the replay connection plugin's matching and the sizing
callback; and one real playbook answered by the replay plugin from a recording.

Only arithmetic, files and the plugin's answers: no timing is asserted anywhere (the bench is not a test).
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'unit'))
from nodeprep_harness import ansible_bin, ansible_env  # noqa: E402  pylint: disable=wrong-import-position


def _load(name, *parts):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, *parts))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ss = _load('scalestats', 'bench', 'scalestats.py')
replay = _load('bench_replay', 'bench', 'connection_plugins', 'bench_replay.py')
sizing = _load('bench_scale', 'bench', 'callback_plugins', 'bench_scale.py')


def payload(fqn, args):
    """An AnsiballZ payload's tail as ansible-core 2.19+ writes it: one `key=<repr>,` line per argument."""
    params = json.dumps({'ANSIBLE_MODULE_ARGS': args})
    lines = ['#!/usr/bin/python3', 'def _ansiballz_main(**kw):', '    pass', '', 'if __name__ == "__main__":',
             '    _ansiballz_main(']
    for key, value in (('ansible_module', fqn.split('.')[-1]), ('module_fqn', fqn), ('params', params),
                       ('zip_data', 'UEsDBA' * 10)):
        lines.append('{0}={1!r},'.format(key, value))
    lines.append(')')
    return '\n'.join(lines).encode('utf-8')


# -- the replay plugin's matching -------------------------------------------------------------------------------------

def test_normalize_command_makes_tmp_names_and_become_marker_constant():
    cmd = ("/bin/sh -c 'echo BECOME-SUCCESS-abcdef; mkdir /root/.ansible/tmp/ansible-tmp-1796514081.1586823-19489-"
           "205765389386337 && echo ansible-tmp-1796514081.1586823-19489-205765389386337=x'")
    assert replay.normalize_command(cmd) == ("/bin/sh -c 'echo BECOME-SUCCESS-X; mkdir /root/.ansible/tmp/"
                                             "ansible-tmp-X && echo ansible-tmp-X=x'")


def test_params_key_ignores_ansible_internals_only():
    a = json.dumps({'ANSIBLE_MODULE_ARGS': {'gather': 'always', '_ansible_tmpdir': '/tmp/a', '_ansible_version': '1'}})
    b = json.dumps({'ANSIBLE_MODULE_ARGS': {'gather': 'always', '_ansible_tmpdir': '/tmp/b'}})
    c = json.dumps({'ANSIBLE_MODULE_ARGS': {'gather': 'never'}})
    assert replay.params_key(a) == replay.params_key(b)
    assert replay.params_key(a) != replay.params_key(c)
    assert replay.params_key(None) is None


def test_module_of_payload_reads_the_fqn_and_params_even_with_quotes():
    args = {'msg': "it's \"quoted\"", 'n': 3}
    fqn, params = replay.module_of_payload(payload('ansible_collections.gpufleet.nodeprep.plugins.modules.x', args))
    assert fqn == 'ansible_collections.gpufleet.nodeprep.plugins.modules.x'
    assert json.loads(params)['ANSIBLE_MODULE_ARGS'] == args
    assert replay.module_of_payload(b'#!/bin/sh\necho hi\n') == (None, None)
    assert replay.module_of_payload(None) == (None, None)


def test_module_run_is_the_run_of_a_put_file_not_its_chores():
    path = '/root/.ansible/tmp/ansible-tmp-1.2-3-4/AnsiballZ_gpu_node_facts.py'
    pending = {path: ('m.gpu_node_facts', '{}')}
    assert replay.module_run("/bin/sh -c '/usr/bin/python3 {0} && sleep 0'".format(path), pending) == (
        'm.gpu_node_facts', '{}')
    assert replay.module_run("/bin/sh -c 'chmod u+rwx /root/.ansible/tmp/ansible-tmp-1.2-3-4/ {0}'".format(path),
                             pending) == (None, None)
    assert replay.module_run("/bin/sh -c 'rm -f -r /root/.ansible/tmp/ansible-tmp-1.2-3-4/ > /dev/null 2>&1'",
                             pending) == (None, None)
    # A run of a file that was not put by this worker is not a module run it can name.
    assert replay.module_run("/bin/sh -c '/usr/bin/python3 /x/AnsiballZ_other.py'", pending) == (None, None)


# -- recordings -------------------------------------------------------------------------------------------------------

def _entries():
    tmp = 'ansible-tmp-1.5-10-20'
    return [
        {'op': 'exec', 'cmd': "/bin/sh -c 'echo ~root'", 'rc': 0, 'stdout': '/root\n', 'stderr': ''},
        {'op': 'exec', 'cmd': "/bin/sh -c 'mkdir {0}'".format(tmp), 'rc': 0, 'stdout': tmp + '=/root/x\n',
         'stderr': ''},
        {'op': 'put', 'dest': '/root/x/AnsiballZ_a.py', 'module': 'm.a', 'params': '{}'},
        {'op': 'exec', 'cmd': 'run a', 'module': 'm.a', 'params': json.dumps({'ANSIBLE_MODULE_ARGS': {'k': 1}}),
         'rc': 0, 'stdout': '{"changed": false}', 'stderr': ''},
        {'op': 'exec', 'cmd': "/bin/sh -c 'echo ~root'", 'rc': 0, 'stdout': '/root\n', 'stderr': ''},
        {'op': 'exec', 'cmd': "/bin/sh -c 'echo ~root'", 'rc': 0, 'stdout': '/home\n', 'stderr': ''},
        # The same mkdir in another task: only the temporary name differs, in the command and in the answer.
        {'op': 'exec', 'cmd': "/bin/sh -c 'mkdir ansible-tmp-2.5-11-21'", 'rc': 0,
         'stdout': 'ansible-tmp-2.5-11-21=/root/x\n', 'stderr': ''},
    ]


def test_compile_recording_splits_modules_and_commands():
    index, outputs = ss.compile_recording(_entries(), replay.normalize_command, replay.params_key)
    assert index['calls'] == 6 and index['puts'] == 1
    assert sorted(index['commands']) == ["/bin/sh -c 'echo ~root'", "/bin/sh -c 'mkdir ansible-tmp-X'"]
    [call] = index['modules']['m.a']
    assert call['params_key'] == replay.params_key(json.dumps({'ANSIBLE_MODULE_ARGS': {'k': 1}}))
    assert outputs[call['stdout_file']] == '{"changed": false}'
    first = index['commands']["/bin/sh -c 'echo ~root'"]
    # The first answer is kept; a later, different answer to the same command is reported as a conflict.
    assert outputs[first['stdout_file']] == '/root\n'
    assert index['conflicts'] == ["/bin/sh -c 'echo ~root'"]


INVENTORY = {'all': {
    'vars': {'ansible_user': 'root', 'nodeprep_expected_gpus': 8},
    'children': {
        'redhat': {'children': {'el9': {
            'hosts': {'n1': {'ansible_host': '10.0.0.2', 'branch': '580'},
                      'n2': {'ansible_host': '10.0.0.6', 'branch': '570'}},
            'vars': {'repo': 'el9'}}}},
        'gpu_b200': {'hosts': {'n1': {}, 'n3': {}}, 'vars': {'clocks': 1965}},
    }}}


def test_inventory_hosts_and_addresses():
    hostvars, groups = ss.inventory_hosts(INVENTORY)
    assert hostvars['n1'] == {'ansible_host': '10.0.0.2', 'branch': '580'}
    assert groups['n1'] == {'el9', 'gpu_b200'} and groups['n3'] == {'gpu_b200'}
    assert ss.addresses(INVENTORY) == {'10.0.0.2': 'n1', '10.0.0.6': 'n2'}


def test_replay_inventory_copies_each_node_into_its_groups():
    inv = ss.replay_inventory(INVENTORY, ['n1', 'n2'], 5, {'report_dir': '/tmp/r'})
    hostvars, groups = ss.inventory_hosts(inv)
    assert sorted(hostvars) == ['n1-x0001', 'n1-x0003', 'n1-x0005', 'n2-x0002', 'n2-x0004']
    assert hostvars['n1-x0003'] == {'ansible_host': '10.0.0.2', 'branch': '580', 'bench_replay_node': 'n1'}
    assert groups['n1-x0005'] == {'el9', 'gpu_b200'} and groups['n2-x0002'] == {'el9'}
    assert inv['all']['vars'] == {'ansible_user': 'root', 'nodeprep_expected_gpus': 8,
                                  'ansible_connection': 'bench_replay', 'report_dir': '/tmp/r'}
    # Group variables stay; a host that was not recorded (n3) is left out; the input is not changed.
    assert inv['all']['children']['gpu_b200']['vars'] == {'clocks': 1965}
    assert 'n3' not in hostvars and 'n1' in INVENTORY['all']['children']['gpu_b200']['hosts']


# -- verdicts and figures ---------------------------------------------------------------------------------------------

def _callback(**changes):
    cb = {
        'recap': {'a': {'ok': 2, 'changed': 0, 'failures': 0, 'unreachable': 0, 'skipped': 1},
                  'b': {'ok': 2, 'changed': 0, 'failures': 0, 'unreachable': 0, 'skipped': 1}},
        'plays': [{'name': 'gather', 'hosts': 2, 'no_hosts_matched': False},
                  {'name': 'kernel', 'hosts': 0, 'no_hosts_matched': True}],
        'tasks': [{'name': 'plan', 'role': None, 'ok': 2, 'changed': 0, 'skipped': 0, 'failed': 0, 'unreachable': 0},
                  {'name': 'group', 'role': None, 'ok': 0, 'changed': 0, 'skipped': 2, 'failed': 0,
                   'unreachable': 0}],
        'sizes': {'sampled': 2, 'cpu_s': 0.5, 'top_keys': {},
                  'per_host': {'a': {'facts': 80000, 'registered': 0, 'set_fact': 1000},
                               'b': {'facts': 90000, 'registered': 2000, 'set_fact': 1000}}},
    }
    cb.update(changes)
    return cb


def test_run_verdict_of_a_no_op():
    noop, why, facts = ss.run_verdict(_callback(), 'site')
    assert noop and why == []
    assert facts['plays_no_hosts'] == ['kernel'] and facts['task_results_per_host'] == 2.0


@pytest.mark.parametrize('recap_change, reason', [
    ({'changed': 1}, 'changed on 1 host(s) (first: b)'),
    ({'failures': 1}, 'failures on 1 host(s) (first: b)'),
    ({'unreachable': 1}, 'unreachable on 1 host(s) (first: b)'),
])
def test_run_verdict_names_what_changed_failed_or_left(recap_change, reason):
    cb = _callback()
    cb['recap']['b'].update(recap_change)
    noop, why, dummy = ss.run_verdict(cb, 'site')
    assert not noop and why == [reason]


def test_run_verdict_role_tasks_only_readiness_may_run():
    task = {'name': 't', 'role': 'gpufleet.nodeprep.readiness', 'ok': 2, 'changed': 0, 'skipped': 0, 'failed': 0,
            'unreachable': 0}
    assert ss.run_verdict(_callback(tasks=[task]), 'readiness')[0]
    noop, why, dummy = ss.run_verdict(_callback(tasks=[task]), 'site')
    assert not noop and why == ['tasks of role(s) gpufleet.nodeprep.readiness ran']
    skipped = dict(task, role='gpufleet.nodeprep.kernel', ok=0, skipped=2)
    assert ss.run_verdict(_callback(tasks=[skipped]), 'site')[0]
    assert ss.run_verdict({}, 'site') == (False, ['no host ran a task'], {
        'plays_no_hosts': [], 'plays': 0, 'task_results_per_host': None, 'changed_hosts': 0, 'failed_hosts': 0,
        'unreachable_hosts': 0})


def test_replay_figures_per_host_and_sizing_taken_out():
    stats = {'rc': 0, 'wall_s': 50.0, 'main_user_s': 8.0, 'main_sys_s': 2.5, 'main_maxrss_kb': 204800,
             'children_user_s': 20.0, 'children_sys_s': 10.0}
    f = ss.replay_figures(100, stats, _callback(), 'site')
    assert f['main_cpu_s'] == 10.0 and f['all_cpu_s'] == 40.0 and f['workers_cpu_s'] == 30.0
    assert f['main_cpu_per_host_ms'] == 100.0 and f['all_cpu_per_host_s'] == 0.4
    assert f['main_peak_mb'] == 200.0
    assert (f['facts_kb_per_host'], f['registered_kb_per_host'], f['set_fact_kb_per_host']) == (85.0, 1.0, 1.0)
    assert f['noop'] and f['sized_hosts'] == 2


def test_growth_is_largest_over_smallest_per_playbook():
    rows = [{'playbook': 'site', 'hosts': 1000, 'k': 130.0}, {'playbook': 'site', 'hosts': 100, 'k': 100.0},
            {'playbook': 'readiness', 'hosts': 100, 'k': 1.0}]
    assert ss.growth(rows, 'k') == {'site': 1.3}


def test_tables_have_one_row_per_run():
    f = ss.replay_figures(100, {'rc': 0, 'wall_s': 5.0, 'main_user_s': 1.0, 'main_sys_s': 0.5, 'main_maxrss_kb': 1024,
                                'children_user_s': 1.0, 'children_sys_s': 1.0}, _callback(), 'site')
    text = ss.replay_table([f, dict(f, playbook='readiness', noop=False, not_noop_because=['x'])])
    lines = text.splitlines()
    assert len(lines) == 4 and lines[2].startswith('| site.yml | 100 |') and lines[3].endswith('| NO: x |')
    table = ss.ssh_table([{'playbook': 'site', 'hosts': 4, 'noop': True, 'replay_all_cpu_per_host_s': 0.5}])
    assert len(table.splitlines()) == 3 and '| 0.500 s |' in table


# -- profiles ---------------------------------------------------------------------------------------------------------

COLLAPSED = '\n'.join([
    'main (scale_run.py:1);StrategyModule.run (ansible/plugins/strategy/linear.py:9);'
    'StrategyBase._queue_task (ansible/plugins/strategy/__init__.py:3);'
    'WorkerProcess.start (ansible/executor/process/worker.py:5);Popen._launch (multiprocessing/popen_fork.py:66) 4',
    'main (scale_run.py:1);StrategyModule.run (ansible/plugins/strategy/linear.py:9);'
    'VariableManager.get_vars (ansible/vars/manager.py:200);'
    'TemplateEngine.template (ansible/_internal/_templating/_engine.py:10) 3',
    'main (scale_run.py:1);StrategyModule.run (ansible/plugins/strategy/linear.py:9);'
    'StrategyBase._process_pending_results (ansible/plugins/strategy/__init__.py:500);'
    'TaskQueueManager.send_callback (ansible/executor/task_queue_manager.py:1) 2',
    'main (scale_run.py:1);StrategyModule.run (ansible/plugins/strategy/linear.py:9);'
    'StrategyBase._process_pending_results (ansible/plugins/strategy/__init__.py:500) 1',
    'main (scale_run.py:1);Templar.template (ansible/template/__init__.py:7) 1',
    'main (scale_run.py:1) 1',
    'not a line',
])


def test_profile_groups_each_sample_once_by_precedence():
    summary = ss.profile_summary(ss.parse_collapsed(COLLAPSED), top=50)
    assert summary['samples'] == 12
    # get_vars wins over the templating below it; a callback inside result handling counts as a callback.
    assert dict(summary['groups']) == {'forks': round(4 / 12, 3), 'variable lookups (get_vars)': 0.25,
                                       'callbacks': round(2 / 12, 3), 'result handling': round(1 / 12, 3),
                                       'templating': round(1 / 12, 3), 'other': round(1 / 12, 3)}
    cumulative = dict((f, (share, g)) for f, share, g in summary['cumulative'])
    assert cumulative['main (scale_run.py)'] == (1.0, 'other')
    assert cumulative['StrategyBase._process_pending_results (ansible/plugins/strategy/__init__.py)'] == (
        0.25, 'result handling')
    own = dict(((f, g), share) for f, share, g in summary['own'])
    assert own[('Popen._launch (multiprocessing/popen_fork.py)', 'forks')] == round(4 / 12, 3)
    assert own[('TemplateEngine.template (ansible/_internal/_templating/_engine.py)',
                'variable lookups (get_vars)')] == 0.25
    text = ss.profile_text('title', summary)
    assert text.startswith('title\n') and '[forks]' in text


# -- the sizing callback ----------------------------------------------------------------------------------------------

class _FactCache(object):
    """The memory fact cache plugin's interface as VariableManager uses it: keys() and get(), no `in`."""

    def __init__(self, data):
        self._data = data

    def keys(self):
        return self._data.keys()

    def get(self, key):
        return self._data[key]


class _VM(object):
    def __init__(self, facts, nonpersistent):
        self._fact_cache = _FactCache(facts)
        self._nonpersistent_fact_cache = nonpersistent


class _Task(object):
    def __init__(self, register):
        self.register = register


def test_even_sample_keeps_ends_and_spacing():
    assert sizing.even_sample(range(10), 3) == [0, 4, 9] or sizing.even_sample(range(10), 3) == [0, 5, 9]
    assert sizing.even_sample([1, 2], 5) == [1, 2]
    assert sizing.even_sample(range(10), 1) == [0]


def test_callback_sizes_facts_registered_and_set_fact_per_host():
    cb = sizing.CallbackModule()
    cb.sample = 10
    cb.vm = _VM({'a': {'nvidia': 'x' * 100}, 'b': {'nvidia': 'y' * 50}},
                {'a': {'__gather': {'k': 'v'}, 'kept': [1, 2]}, 'c': {'kept': 'z'}})
    cb.v2_playbook_on_task_start(_Task({'__gather': 'projection'}), False)  # 2.21: {name: projection}
    cb.v2_playbook_on_task_start(_Task('old_style'), False)
    cb.v2_playbook_on_task_start(_Task(None), False)
    sizes = cb._sizes()
    assert cb.registered == {'__gather', 'old_style'}
    assert sizes['hosts_in_caches'] == 3 and sizes['sampled'] == 3
    # Each key's value as compact JSON: "x...x" is 102 bytes, {"k":"v"} 9, [1,2] 5.
    assert sizes['per_host']['a'] == {'facts': 102, 'registered': 9, 'set_fact': 5}
    assert sizes['per_host']['c'] == {'facts': 0, 'registered': 0, 'set_fact': len('"z"')}
    assert sizes['top_keys']['facts'][0] == {'key': 'nvidia', 'mean_bytes': round((102 + 52) / 3)}
    assert sizes['shared'] == []


def test_callback_sizes_a_run_once_result_once_apart():
    """A run_once task's registered result is one object set on every host: sized once, in no host's figure."""
    report = {'matrix': 'x' * 1000}
    cb = sizing.CallbackModule()
    cb.vm = _VM({}, {'a': {'__report': report, 'own': 1}, 'b': {'__report': report, 'own': 2}})
    cb.v2_playbook_on_task_start(_Task({'__report': 'projection'}), False)
    sizes = cb._sizes()
    assert sizes['per_host'] == {'a': {'facts': 0, 'registered': 0, 'set_fact': 1},
                                 'b': {'facts': 0, 'registered': 0, 'set_fact': 1}}
    assert sizes['shared'] == [{'key': '__report', 'bytes': len('{"matrix":"' + 'x' * 1000 + '"}')}]
    f = ss.replay_figures(2, {'rc': 0, 'wall_s': 1.0, 'main_user_s': 1.0, 'main_sys_s': 0.0, 'main_maxrss_kb': 1024,
                              'children_user_s': 0.0, 'children_sys_s': 0.0},
                          {'recap': {}, 'sizes': sizes}, 'site')
    assert f['shared_kb'] == 1.0 and '| __report 1 kB |' in ss.replay_table([f])


# -- a real playbook answered from a recording ------------------------------------------------------------------------

def test_a_playbook_runs_on_recorded_answers(tmp_path):
    """ansible-playbook (this environment's ansible-core) with the bench_replay connection: the ping module is built,
    handed over (pipelining: as in_data), matched by name and arguments, and its recorded answer is the result; a
    module that was not recorded fails the host as unreachable, naming the node."""
    node = tmp_path / 'rec' / 'node1'
    node.mkdir(parents=True)
    (node / '0.out').write_text(json.dumps({'ping': 'recorded answer', 'changed': False}))
    key = replay.params_key(json.dumps({'ANSIBLE_MODULE_ARGS': {}}))
    (node / 'index.json').write_text(json.dumps({
        'modules': {'ansible.modules.ping': [{'params_key': key, 'rc': 0, 'stderr': '', 'stdout_file': '0.out'}]},
        'commands': {}}))
    (tmp_path / 'inv.yml').write_text(yaml_text({'all': {'hosts': {'h1': {'bench_replay_node': 'node1'},
                                                                   'h2': {'bench_replay_node': 'node1'}},
                                                         'vars': {'ansible_connection': 'bench_replay',
                                                                  'ansible_python_interpreter': '/usr/bin/python3'}}}))
    (tmp_path / 'play.yml').write_text(
        '- hosts: all\n  gather_facts: false\n  tasks:\n'
        '    - ansible.builtin.ping:\n      register: r\n'
        '    - ansible.builtin.assert:\n        that: r.ping == "recorded answer"\n'
        '    - ansible.builtin.command: "true"\n')
    log = tmp_path / 'replay.log'
    env = ansible_env(ANSIBLE_CONNECTION_PLUGINS=os.path.join(ROOT, 'bench', 'connection_plugins'),
                      BENCH_REPLAY_DIR=str(tmp_path / 'rec'), BENCH_REPLAY_LOG=str(log), ANSIBLE_PIPELINING='True',
                      ANSIBLE_STDOUT_CALLBACK='ansible.builtin.minimal')
    proc = subprocess.run([ansible_bin('ansible-playbook'), '-i', str(tmp_path / 'inv.yml'), str(tmp_path / 'play.yml')],
                          env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    out = proc.stdout
    assert proc.returncode == 4, out  # the command module was not recorded: unreachable
    assert 'h1 | SUCCESS' in out and 'h2 | SUCCESS' in out, out
    assert 'h1 | UNREACHABLE!' in out and 'h2 | UNREACHABLE!' in out, out
    assert 'bench_replay: ansible.modules.command was recorded 0 times on node1' in out, out
    assert sorted(log.read_text().splitlines()) == ['node1\tansible.modules.ping\tsame arguments'] * 2


def yaml_text(data):
    import yaml
    return yaml.safe_dump(data, default_flow_style=False)
