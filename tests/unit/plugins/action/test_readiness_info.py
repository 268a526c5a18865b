# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/readiness_info.py: the settings typed once, one gather (the health reads in it), every role's
plan made and judged on the controller, and the per-host result the report reads.  What the gather runs on the node
for the health reads is tested with gpu_node_facts (tests/unit/plugins/modules/test_gpu_node_facts_health.py)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.action import readiness_info
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._node_state import collect_files
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_gpu_settings as pg
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as r
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_gpu_settings as T
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_imex as X
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F

XID = ("2025-06-02T10:11:12+0000 node07 kernel: NVRM: Xid (PCI:0000:c4:00): 79, pid='<unknown>', name=<unknown>, "
       "GPU has fallen off the bus.")
LOG = {'source': 'journalctl -k -b 0 (last 20000 lines)', 'lines': [], 'error': None}


def inventory():
    """The inventory variables of the converged node of test_readiness_facts (the readiness role's own left at
    their defaults, as the role's defaults/main.yml would give them; the perf_tools role left out: its tests are
    below, "the performance gates")."""
    _facts, settings, _probe = F.converged()
    return dict((k, v) for k, v in settings.items()
                if k not in _readiness_settings.SETTINGS and not k.startswith('nodeprep_perf_tools_'))


def converged_gather(settings=None):
    """What gpu_node_facts returns on the converged node: its facts, the kernel log read, and the gpu_settings role's
    files and state as that role left them (its plan applied to the node)."""
    facts, _settings, probe = F.converged()
    given = settings or inventory()
    # The nvidia_driver role's packages and files as that role left them (test_readiness_facts.driver_facts).
    facts = F.driver_facts(facts, probe, _plans.typed_settings('nvidia_driver', given)[0])
    typed, problems = _plans.typed_settings('gpu_settings', given)
    request = pg.gather(typed)
    facts['nodeprep_files'].update((path, {'exists': False}) for path in request['files'])
    facts['nodeprep_contents'] = {pg.RECORD: None, pg.BOOT_ID: T.BOOT + '\n'}
    facts['nodeprep_units'][pg.UNIT] = {'load': 'loaded', 'active': 'active', 'sub': 'exited', 'enabled': 'enabled'}
    facts['nodeprep_gathered'] = sorted(set(facts['nodeprep_gathered']) | {'units', 'contents', 'kernel_log'})
    first = _plans.plan_role('gpu_settings', facts, typed, problems, _plan.new_context(host='gpu-a01'))
    facts = T.settle(facts, first, touch_gpus=False)
    facts['nodeprep_kernel_log'] = dict(probe['kernel_log'])
    facts['nodeprep_errors'] = {}
    return facts


def run(variables, gathered=None, module_result=None, args=None, check_mode=False):
    task = MagicMock()
    task.args = args or {}
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    context = PlayContext()
    context.check_mode = check_mode
    action = readiness_info.ActionModule(task, MagicMock(), context, loader=DataLoader(),
                                         templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        if module_result is not None:
            return module_result
        return {'ansible_facts': copy.deepcopy(gathered if gathered is not None else converged_gather())}
    action._execute_module = execute
    result = action.run(task_vars=dict(variables, inventory_hostname='gpu-a01'))
    return result, calls


def by_id(result, check_id):
    return [c for c in result['checks'] if c['id'] == check_id][0]


def test_converged_node_is_ready_with_one_gather_and_no_plan_sent():
    result, calls = run(inventory())
    assert [name for name, _args in calls] == ['gpufleet.nodeprep.gpu_node_facts']
    module_args = calls[0][1]
    # Everything the checks read, in the one gather: the subsets, the health read, the roles' units and files.
    assert module_args['gather_subset'] == ['nvidia', 'kernel', 'limits', 'shm', 'nic']
    assert (module_args['fail_on_error'], module_args['nvidia_timeout'], module_args['nvidia_topology'],
            module_args['kernel_log_lines'], module_args['nvidia_nvlink']) == (False, 60, True, 20000, True)
    assert 'dcgm_diag' not in module_args
    assert '/etc/nccl.conf' in module_args['files'] and 'nvidia-persistenced.service' in module_args['units']
    assert sorted(k for k in module_args if k in ('plans', 'settings', 'facts')) == []
    assert result['changed'] is False and result['ready'] is True
    assert sorted(result) == ['changed', 'checked_values', 'checks', 'lost_gpus', 'ready', 'summary', 'values']
    assert result['checked_values'] == result['values']
    # gpu.dcgm_diag is opt-in (nodeprep_readiness_dcgm false): it skips and the gather runs no DCGM command; the node
    # is in no IMEX domain (nodeprep_imex_domain_group unset): imex.domain skips and nvidia-imex-ctl is not run (no
    # imex subset above); so are the perf_tools role and the performance gates (the gather runs no tool).
    assert [(c['id'], c['status']) for c in result['checks'] if c['status'] != 'pass'] == [
        ('gpu.dcgm_diag', 'skip'), ('imex.domain', 'skip'), ('perf.tools', 'skip'), ('perf.allreduce', 'skip'),
        ('perf.nvbandwidth', 'skip')]
    assert 'perf_tools' not in module_args
    assert result['summary'] == {'pass': 26, 'warn': 0, 'fail': 0, 'skip': 5, 'status': 'pass'}
    assert [c['id'] for c in result['checks']] == list(r.CHECK_IDS)
    assert result['lost_gpus'] == []
    values = dict(result['values'])
    assert values['power limit'] == '700 W = 70% of the default 1000 W (range 200-1000 W) on 8 GPUs'
    assert values['/dev/shm'] == ('716.0 GiB live, 716.0 GiB in fstab; GPU memory 1.4 TiB, so /dev/shm = 50% of it; '
                                  'wanted at least 716.0 GiB')
    assert values['memlock (soft/hard KiB)'] == 'root unlimited/unlimited, train unlimited/unlimited'


def test_the_roles_default_report_dir_reaches_the_check_and_is_taken():
    """The role's defaults are in task_vars on every run: its ./readiness-report (a folder on the controller) is not
    refused as a node path (it was: every node readiness.unchecked, found by make rolling-fleet)."""
    result, calls = run(dict(inventory(), nodeprep_readiness_report_dir='./readiness-report'))
    assert [name for name, _args in calls] == ['gpufleet.nodeprep.gpu_node_facts']
    assert not result.get('failed') and result['ready'] is True


def test_the_globs_the_gather_read_are_recorded_for_the_plans():
    """gpu_node_facts reports only the paths a glob matched: the plans must know which globs were read, as node_plan
    records them (nodeprep_file_patterns), or the nic_offload plan finds its per-interface files not gathered (the
    fleet showed it: nic.offload failed on every converged node)."""
    gathered = converged_gather()
    del gathered['nodeprep_file_patterns']
    result, calls = run(inventory(), gathered=gathered)
    globs = [path for path in calls[0][1]['files'] if '*' in path]
    assert globs == ['/etc/nodeprep/nic-offload/*.env', '/etc/systemd/system/sys-subsystem-net-devices-*.device.wants',
                     '/etc/systemd/system/sys-subsystem-net-devices-*.device.wants/nodeprep-nic-offload@*.service']
    assert by_id(result, 'nic.offload')['status'] == 'pass'


def test_settings_given_as_strings_are_typed_once():
    variables = inventory()
    variables.update(nodeprep_readiness_kernel_log_lines='500', nodeprep_readiness_dcgm='false',
                     nodeprep_expected_gpus='8', nodeprep_readiness_xid_fail='79,48')
    result, calls = run(variables)
    assert calls[0][1]['kernel_log_lines'] == 500 and 'dcgm_diag' not in calls[0][1]
    assert by_id(result, 'gpu.count')['expected'] == '8 GPUs in nvidia-smi and on the PCI bus (nodeprep_expected_gpus)'
    gathered = converged_gather()
    gathered['nodeprep_kernel_log']['lines'] = [XID]
    result, _calls = run(variables, gathered=gathered)
    assert by_id(result, 'gpu.health')['status'] == 'fail'


def test_an_xid_in_the_kernel_log_fails_gpu_health():
    gathered = converged_gather()
    gathered['nodeprep_kernel_log'] = {'source': 'dmesg (last 20000 lines)', 'lines': ['[ 99.1] ' + XID],
                                       'error': None}
    result, _calls = run(inventory(), gathered=gathered)
    health = by_id(result, 'gpu.health')
    assert (health['status'], health['observed']) == (
        'fail', "Xid 79 on 0000:c4:00.0 x1: pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    assert result['ready'] is False
    assert result['summary']['status'] == 'fail'


def test_kernel_log_off_reads_nothing_and_says_so():
    variables = dict(inventory(), nodeprep_readiness_kernel_log_lines=0)
    gathered = converged_gather()
    del gathered['nodeprep_kernel_log']
    result, calls = run(variables, gathered=gathered)
    assert 'kernel_log_lines' not in calls[0][1]
    assert by_id(result, 'gpu.health')[
        'observed'] == 'kernel log not read: not read (kernel_log_lines is 0)'
    assert by_id(result, 'gpu.health')['status'] == 'warn'
    assert by_id(result, 'nccl.config')['observed'] == '/etc/nccl.conf: as wanted'
    # The unit as the nvidia_driver plan read it in the gather.
    assert by_id(result, 'driver.persistenced')['observed'] == 'nvidia-persistenced: active, enabled'


def test_services_as_the_gather_read_them():
    gathered = converged_gather()
    gathered['nodeprep_units']['nvidia-persistenced.service'] = {'load': 'not-found', 'active': 'inactive',
                                                                 'sub': 'dead', 'enabled': None}
    gathered['nodeprep_units']['nvidia-fabricmanager.service']['active'] = 'failed'
    result, _calls = run(inventory(), gathered=gathered)
    assert by_id(result, 'driver.persistenced')['status'] == 'warn'
    assert by_id(result, 'fabric.manager')['observed'] == ('2 NVSwitches on the PCI bus; nvidia-fabricmanager: '
                                                           'failed, enabled')


def test_lost_gpu_reported():
    gathered = converged_gather()
    del gathered['nvidia']['gpus'][4]
    result, _calls = run(inventory(), gathered=gathered)
    assert result['lost_gpus'] == [{'bus_id': '0000:c4:00.0', 'reason': 'on the PCI bus, not listed by nvidia-smi'}]
    assert result['ready'] is False


def test_dcgm_diagnostic_is_read_in_the_same_gather_and_judged_here():
    variables = dict(inventory(), nodeprep_readiness_dcgm=True, nodeprep_readiness_dcgm_level=2,
                     nodeprep_readiness_dcgm_timeout=90)
    gathered = converged_gather()
    gathered['nodeprep_dcgm'] = dict(F.dcgm_passing(), level=2, timeout=90,
                                     discovery={'rc': 0, 'stdout': '8 GPUs found (Active).\n', 'stderr': '',
                                                'timed_out': False})
    result, calls = run(variables, gathered=gathered)
    assert [name for name, _args in calls] == ['gpufleet.nodeprep.gpu_node_facts']
    assert (calls[0][1]['dcgm_diag'], calls[0][1]['dcgm_level'], calls[0][1]['dcgm_timeout']) == (True, 2, 90)
    assert (by_id(result, 'gpu.dcgm_diag')['status'], by_id(result, 'gpu.dcgm_diag')['observed']) == (
        'pass', 'DCGM 4.1.1: 8 results of diagnostic (DCGM sees 8 GPUs); all passed')


def test_dcgm_not_installed_skips_where_the_dcgm_role_does_not_manage_it():
    gathered = converged_gather()
    gathered['nodeprep_dcgm'] = {'enabled': True, 'level': 1, 'timeout': 300, 'dcgmi': None}
    result, _calls = run(dict(inventory(), nodeprep_readiness_dcgm=True), gathered=gathered)
    check = by_id(result, 'gpu.dcgm_diag')
    assert (check['status'], check['observed']) == ('skip', 'DCGM is not installed (no dcgmi in PATH; role '
                                                            'gpufleet.nodeprep.dcgm installs it)')


# Three GB200 trays of one IMEX domain (inventory group rack7); this node (gpu-a01) is 10.0.7.3.
IMEX_HOSTS = [('gpu-a01', '10.0.7.3'), ('gpu-a02', '10.0.7.12'), ('gpu-a03', '10.0.7.21')]


def imex_inventory(**extra):
    variables = dict(inventory(), nodeprep_imex_domain_group='rack7', **extra)
    variables['groups'] = {'rack7': [host for host, _address in reversed(IMEX_HOSTS)]}
    variables['hostvars'] = dict((host, {'ansible_host': address}) for host, address in IMEX_HOSTS)
    return variables


def imex_gather(domain=None):
    """The converged node with the imex role's work done (test__plan_imex.converged: node list, channel, boot unit,
    nvidia-imex running, the domain as nvidia-imex-ctl -N -j shows it)."""
    gathered = converged_gather()
    node = X.converged()
    gathered['imex'] = node['imex']
    if domain is not None:
        gathered['imex']['ctl']['domain'] = domain
    gathered['nodeprep_units'].update(node['nodeprep_units'])
    gathered['nodeprep_files'].update(node['nodeprep_files'])
    gathered['nodeprep_gathered'] = sorted(set(gathered['nodeprep_gathered']) | {'imex'})
    return gathered


def test_an_imex_domain_member_is_judged_from_the_same_gather_with_its_group_from_the_inventory():
    result, calls = run(imex_inventory(nodeprep_imex_ctl_timeout=45), gathered=imex_gather())
    assert [name for name, _args in calls] == ['gpufleet.nodeprep.gpu_node_facts']
    module_args = calls[0][1]
    assert module_args['gather_subset'] == ['nvidia', 'kernel', 'limits', 'shm', 'nic', 'imex']
    assert (module_args['imex_config'], module_args['imex_timeout']) == ('/etc/nvidia-imex/config.cfg', 45)
    assert 'nvidia-imex.service' in module_args['units'] and X.X.SCRIPT in module_args['files']
    check = by_id(result, 'imex.domain')
    assert (check['status'], check['observed']) == ('pass', 'UP: 3/3 nodes READY, all connected; channel0 present')
    assert check['expected'].startswith('nvidia-imex running with the 3 nodes of group rack7 in address order '
                                        '(gpu-a01 10.0.7.3, gpu-a02 10.0.7.12, gpu-a03 10.0.7.21)')
    assert result['ready'] is True


def test_an_imex_peer_down_fails_the_member_naming_it():
    result, _calls = run(imex_inventory(), gathered=imex_gather(X.DOWN))
    check = by_id(result, 'imex.domain')
    assert check['status'] == 'fail' and result['ready'] is False
    assert check['observed'].split('; ')[2:] == [
        'peer gpu-a02 (10.0.7.12) is UNAVAILABLE (it does not answer: nvidia-imex stopped, or the node is down or '
        'unreachable)', 'gpu-a01 (10.0.7.3) -> gpu-a02 (10.0.7.12): RECOVERING (connection lost, not cleaned up yet)',
        'IMEX domain DEGRADED']


def test_only_the_checks_asked_for():
    """playbooks/recover_gpu.yml compares nvidia-smi with the PCI bus only: the gather reads the GPU and kernel facts,
    and the result holds gpu.count alone."""
    gathered = converged_gather()
    del gathered['nvidia']['gpus'][4]
    variables = dict(inventory(), nodeprep_readiness_nvidia_timeout=30)
    result, calls = run(variables, gathered=gathered, args={'checks': ['gpu.count']})
    assert calls[0][1]['gather_subset'] == ['nvidia', 'kernel']
    assert (calls[0][1]['nvidia_timeout'], calls[0][1].get('nvidia_topology', False),
            calls[0][1].get('nvidia_nvlink', False)) == (30, False, False)
    assert 'kernel_log_lines' not in calls[0][1]
    assert [c['id'] for c in result['checks']] == ['gpu.count']
    assert result['summary'] == {'pass': 0, 'warn': 0, 'fail': 1, 'skip': 0, 'status': 'fail'}
    assert result['lost_gpus'] == [{'bus_id': '0000:c4:00.0', 'reason': 'on the PCI bus, not listed by nvidia-smi'}]


@pytest.mark.parametrize('checks, words', [
    (['gpu.count', 'gpu.power'], 'checks: unknown check ids gpu.power; allowed: check ids of kernel.devel_matched, '),
    ([], 'checks: empty; allowed: check ids of kernel.devel_matched, '),
])
def test_unknown_checks_are_refused(checks, words):
    with pytest.raises(AnsibleActionFail) as exc:
        run(inventory(), args={'checks': checks})
    assert str(exc.value).startswith(words)


@pytest.mark.parametrize('name, value, words', [
    ('nodeprep_readiness_skip_checks', ['gpu.power', 'nic.offload'],
     'readiness check: nodeprep_readiness_skip_checks: unknown check ids gpu.power; known: ' + ', '.join(r.CHECK_IDS)),
    ('nodeprep_readiness_kernel_log_lines', -5,
     'readiness check: nodeprep_readiness_kernel_log_lines=-5 is negative; allowed: 0 (do not read the kernel log) '
     'or a positive number of lines'),
    ('nodeprep_readiness_dcgm_level', 5,
     'readiness check: nodeprep_readiness_dcgm_level=5: value of nodeprep_readiness_dcgm_level must be one of: 1, 2, '
     '3, 4, got: 5 (role readiness: docs/roles/readiness.md)'),
    ('nodeprep_expected_gpus', 'eight',
     'readiness check: nodeprep_expected_gpus="eight": argument \'nodeprep_expected_gpus\' is of type str and we were '
     'unable to convert to int:'),
])
def test_a_bad_setting_fails_with_its_name_before_anything_is_read(name, value, words):
    result, calls = run(dict(inventory(), **{name: value}))
    assert result['failed'] is True
    assert result['msg'].startswith(words)
    assert calls == []


def test_a_failed_or_unreachable_gather_is_the_result():
    result, _calls = run(inventory(), module_result={'failed': True, 'msg': 'gpu_node_facts: bad option'})
    assert (result['failed'], result['msg']) == (True, 'gpu_node_facts: bad option')
    result, _calls = run(inventory(), module_result={'unreachable': True, 'msg': 'ssh: no route to host'})
    assert (result['unreachable'], result['msg']) == (True, 'ssh: no route to host')


def test_check_mode_is_the_same():
    result, calls = run(inventory(), check_mode=True)
    assert len(calls) == 1
    assert result['changed'] is False and result['summary']['status'] == 'pass'


def test_nccl_conf_with_a_byte_that_is_not_utf8(tmp_path):
    """One non-UTF-8 byte in the NCCL file: its SHA-1 (what gpu_node_facts gathers) differs, nccl.config fails, and
    every other check still comes back (nothing decodes the file)."""
    path = tmp_path / 'nccl.conf'
    path.write_bytes(F.NCCL_CONF.encode('utf-8') + b'NCCL_DEBUG_FILE=/tmp/caf\xe9\n')
    variables = dict(inventory(), nodeprep_nccl_conf_path=str(path))
    gathered = converged_gather()
    gathered['nodeprep_files'].update(collect_files([str(path)]))
    result, _calls = run(variables, gathered=gathered)
    got = dict((c['id'], (c['status'], c['observed'])) for c in result['checks'])
    assert got['nccl.config'] == ('fail', '{0}: content differs'.format(path))
    # (gpu.dcgm_diag, imex.domain, perf.tools and the performance gates skip: all opt-in.)
    assert sorted(status for status, _observed in got.values()) == ['fail'] + ['pass'] * 25 + ['skip'] * 5
    assert dict(result['values'])['NCCL files'] == '{0}: content differs'.format(path)


def test_the_checks_get_exactly_their_settings():
    """The action hands the checks of _readiness.py SETTING_NAMES, typed once: the readiness role's own settings
    and the collection-wide nodeprep_expected_gpus; the roles' own variables reach their checks through their plans."""
    own, roles, problems = readiness_info.type_settings({})
    assert problems == []
    assert set(r.SETTING_NAMES) <= set(own)
    assert sorted(set(own) - set(_readiness_settings.SETTINGS)) == ['nodeprep_expected_gpus']
    assert sorted(roles) == sorted(_plans.RULES)
    assert own['nodeprep_expected_gpus'] == 0 and own['nodeprep_readiness_kernel_log_lines'] == 20000


def test_the_limits_the_node_read_are_resolved_here():
    """gpu_node_facts returns what the node read of the limits subset; readiness_info resolves it as node_plan does
    (plugin_utils/_limits_gather.py), so memlock.users judges the users jobs run as ('*') from the files' text."""
    read = {'debian': False, 'nr_open': '1048576\n', 'proc1_limits': None,
            'files': [{'path': '/etc/security/limits.d/90-nodeprep-memlock.conf', 'not_utf8': False, 'error': None,
                       'text': '*\t-\tmemlock\tunlimited\nroot\t-\tmemlock\tunlimited\n'},
                      {'path': '/etc/security/limits.d/99-site.conf', 'not_utf8': False, 'error': None,
                       'text': '* hard memlock 65536\n'}],
            'accounts': {'root': {'uid': 0, 'gid': 0, 'groups': ['root'], 'gids': [0]},
                         'train': {'uid': 1000, 'gid': 1000, 'groups': ['train'], 'gids': [1000]},
                         '*': {'uid': None, 'gid': None, 'groups': [], 'gids': []}},
            'systemd': {'files': [], 'manager': None, 'reason': 'systemctl not found in PATH',
                        'services': {'slurmd': {'show': None, 'error': 'systemctl not found in PATH'}}},
            'slurm': None}
    gathered = converged_gather()
    gathered['limits'] = {'read': read}
    variables = dict(inventory(), nodeprep_memlock_verify_users=['root', '*', 'train'])
    result, calls = run(variables, gathered=gathered)
    assert calls[0][1]['limits_users'] == ['root', '*', 'train']
    users = by_id(result, 'memlock.users')
    assert users['status'] == 'fail'
    assert '/etc/security/limits.d/99-site.conf:1' in users['observed']
    # A user the node does not know: the subset's error, the check fails on it, every other check is still judged.
    gathered['limits'] = {'read': dict(read, accounts=dict(read['accounts'], train=None))}
    result, _calls = run(variables, gathered=gathered)
    assert by_id(result, 'memlock.users')['status'] == 'fail'
    assert "user 'train' given in users does not exist on this host" in by_id(result, 'memlock.users')['observed']
    assert by_id(result, 'nccl.config')['status'] == 'pass'


# A hung node costs only itself: every command of the gather has nodeprep_command_timeout, typed once here.
def test_every_command_of_the_gather_has_the_command_limit():
    _result, calls = run(inventory())
    assert calls[0][1]['command_timeout'] == 60
    _result, calls = run(dict(inventory(), nodeprep_command_timeout='25'))
    assert calls[0][1]['command_timeout'] == 25


@pytest.mark.parametrize('value, words', [
    (0, 'readiness check: nodeprep_command_timeout=0: must be at least 1 second'),
    ('soon', 'readiness check: nodeprep_command_timeout="soon": argument \'nodeprep_command_timeout\' is of type str'),
    (float('inf'), 'readiness check: nodeprep_command_timeout=Infinity: an infinite number'),
])
def test_a_bad_command_limit_is_refused_before_anything_is_read(value, words):
    result, calls = run(dict(inventory(), nodeprep_command_timeout=value))
    assert result['failed'] is True
    assert result['msg'].startswith(words), result['msg']
    assert calls == []


def run_unreachable(error, ssh_timeout=10):
    context = PlayContext()
    connection = MagicMock()
    connection.get_option.side_effect = lambda name: {'timeout': ssh_timeout}[name]
    task = MagicMock()
    task.args, task.async_val, task.check_mode, task.diff = {}, 0, False, False
    action = readiness_info.ActionModule(task, connection, context, loader=DataLoader(),
                                         templar=Templar(loader=DataLoader()), shared_loader_obj=None)

    def execute(module_name, module_args, task_vars):
        raise error
    action._execute_module = execute
    return action.run(task_vars=dict(inventory(), inventory_hostname='gpu-a01'))


def test_a_connection_that_timed_out_names_the_ssh_connect_limit():
    banner = 'Failed to connect to the host via ssh: Connection timed out during banner exchange'
    with pytest.raises(AnsibleConnectionFailure) as caught:
        run_unreachable(AnsibleConnectionFailure(banner))
    assert str(caught.value) == banner + ' (the SSH connect limit of 10 s passed: ansible_ssh_timeout)'
    refused = 'ssh: connect to host 10.238.0.13 port 22: Connection refused'
    with pytest.raises(AnsibleConnectionFailure) as caught:
        run_unreachable(AnsibleConnectionFailure(refused))
    assert str(caught.value) == refused


# ---------------------------------------------------------------------------------------------------------------------
# the performance gates: the scheduler's view decides before the gather; a busy node never runs a tool

def _perf_inventory(**extra):
    variables = dict(inventory(), nodeprep_perf_tools_install=True, nodeprep_readiness_performance=True,
                     nodeprep_readiness_performance_thresholds=dict(F.B200_NVBANDWIDTH))
    variables.update(extra)
    return variables


def _perf_gather():
    gathered = converged_gather()
    facts, _settings, _probe = F.converged()
    gathered['nodeprep_files'].update(F.perf_tools_files())
    gathered['nodeprep_file_patterns'] = facts['nodeprep_file_patterns']
    gathered['kernel_state'] = F.perf_tools_facts(gathered)['kernel_state']
    gathered['kernel_state']['driver_node']['packages'].update(F.PERF_PACKAGES)
    gathered[r.PERF_FACT] = F.perf_passing()['runs']
    return gathered


IDLE = {'NodeName': 'gpu-a01', 'State': 'IDLE', 'Reason': ''}
DRAINED_OURS = {'NodeName': 'gpu-a01', 'State': 'IDLE+DRAIN', 'Reason': 'nodeprep:20260101T000000:verify'}
BUSY = {'NodeName': 'gpu-a01', 'State': 'MIXED', 'Reason': ''}


@pytest.mark.parametrize('record, jobs', [(IDLE, []), (DRAINED_OURS, [])])
def test_an_idle_or_drained_node_runs_both_tools_in_the_one_gather(record, jobs):
    node_state = {'scheduler': 'slurm', 'record': record, 'jobs': jobs, 'error': None}
    result, calls = run(_perf_inventory(), gathered=_perf_gather(), args={'node_state': node_state})
    module_args = calls[0][1]
    assert len(calls) == 1
    assert module_args['perf_tools'] == {'all_reduce_perf': '/opt/nodeprep/perf/bin/all_reduce_perf',
                                         'nvbandwidth': '/opt/nodeprep/perf/bin/nvbandwidth'}
    assert module_args['perf_timeout'] == 600
    got = dict((c['id'], c['status']) for c in result['checks'] if c['id'].startswith('perf.'))
    assert got == {'perf.tools': 'pass', 'perf.allreduce': 'pass', 'perf.nvbandwidth': 'pass'}
    assert result['ready'] is True


@pytest.mark.parametrize('node_state, why', [
    ({'scheduler': 'slurm', 'record': BUSY, 'jobs': ['4242'], 'error': None},
     'not run: busy, Slurm runs job 4242 on this node (State=MIXED)'),
    ({'scheduler': 'slurm', 'record': IDLE, 'jobs': ['4242'], 'error': None},
     'not run: busy, Slurm runs job 4242 on this node (State=IDLE)'),
    ({'scheduler': 'slurm', 'record': None, 'jobs': [], 'error': 'Slurm controller slurm-head: scontrol failed'},
     'not run: the scheduler could not be read, so the node may run a job: Slurm controller slurm-head: scontrol '
     'failed'),
    (None, 'not run: no scheduler was asked and nodeprep_readiness_node_idle is false (the gates run only on a node '
           'that runs no job: idle or drained in Slurm, or declared idle)'),
])
def test_a_busy_or_unknown_node_runs_no_tool(node_state, why):
    result, calls = run(_perf_inventory(nodeprep_readiness_node_idle=node_state is not None),
                        gathered=_perf_gather(), args={'node_state': node_state})
    assert 'perf_tools' not in calls[0][1]
    gates = [(c['id'], c['status'], c['observed']) for c in result['checks'] if c['id'].startswith('perf.')]
    assert gates[1:] == [('perf.allreduce', 'skip', why), ('perf.nvbandwidth', 'skip', why)]


def test_declared_idle_without_a_scheduler_runs_the_tools_of_the_given_paths():
    variables = _perf_inventory(nodeprep_readiness_node_idle=True, nodeprep_perf_tools_install=False,
                                nodeprep_perf_tools_all_reduce_perf='/usr/local/bin/all_reduce_perf')
    _result, calls = run(variables, gathered=_perf_gather())
    assert calls[0][1]['perf_tools'] == {'all_reduce_perf': '/usr/local/bin/all_reduce_perf',
                                         'nvbandwidth': '/opt/nodeprep/perf/bin/nvbandwidth'}


def test_a_bad_node_state_is_refused():
    with pytest.raises(AnsibleActionFail, match='node_state: expected null or'):
        run(_perf_inventory(), gathered=_perf_gather(), args={'node_state': 'idle'})


def test_settings_only_types_the_settings_of_the_run_once_steps_and_gathers_nothing():
    result, calls = run({'nodeprep_readiness_performance': 'yes', 'nodeprep_readiness_report': 'false',
                         'nodeprep_readiness_slurm': 'drain', 'groups': {'slurm_head': ['head-01']}},
                        args={'settings_only': True})
    assert calls == [] and not result.get('failed') and result['changed'] is False
    assert result['settings']['nodeprep_readiness_performance'] is True
    assert result['settings']['nodeprep_readiness_report'] is False
    assert result['settings']['nodeprep_readiness_slurm'] == 'drain'
    assert sorted(result['settings']) == sorted(_readiness_settings.SETTINGS)
    assert (result['slurm_controller'], result['slurm_delegate']) == ('head-01', 'head-01')


def test_settings_only_refuses_a_setting_that_does_not_type_naming_it():
    # A typo of true is not false: refused, as the role's argument spec refuses it.
    result, calls = run({'nodeprep_readiness_performance': 'ture'}, args={'settings_only': True})
    assert calls == [] and result['failed'] is True
    assert result['msg'].startswith('readiness check: nodeprep_readiness_performance="ture": '), result['msg']
    assert 'settings' not in result
