# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia_driver role's plan (plugins/module_utils/plans/_plan_nvidia_driver.py): facts + settings -> plan.

The settings go through _plans.typed_settings first, as the node_plan action sends them: ``"false"`` (the -e k=v
form) must never reboot a node or install IMEX or nvidia-persistenced (issue #22).
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import hashlib
import os

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver as P
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _driver_packages
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nvidia_driver as D
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

EL9 = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
       'distribution_major_version': '9', 'architecture': 'x86_64'}
K9 = '5.14.0-570.el9.x86_64'
K9_NEXT = '5.14.0-611.el9.x86_64'
VERSION = '580.95.05'
H100_PCI = {'gpus': [{'bus_id': '0000:1b:00.0', 'device_id': '0x2330'}], 'gpu_count': 1,
            'nvswitches': [{'bus_id': '0000:05:00.0', 'device_id': '0x22a3'}], 'nvswitch_count': 1,
            'nvlink5_bridges': [], 'nvlink5_bridge_count': 0, 'nvswitch_fabric': 'pci'}
NO_SMI = {'present': False, 'error': 'nvidia-smi not found', 'driver_version': None, 'gpus': []}
SMI = {'present': True, 'error': None, 'driver_version': VERSION,
       'gpus': [{'index': 0, 'architecture': 'Hopper', 'pci_device_id': '0x233010DE'}]}
LOADED = {'loaded': True, 'version': VERSION, 'flavour': 'open'}
NOT_LOADED = {'loaded': False, 'version': None, 'flavour': None}
RUNNING = {'load': 'loaded', 'active': 'active', 'sub': 'running', 'enabled': 'enabled'}
ABSENT = {'load': 'not-found', 'active': 'inactive', 'sub': 'dead', 'enabled': ''}
NO_FILE = {'exists': False}
FRESH_UNITS = dict((u, ABSENT) for u in list(D.UNITS) + D.SETTINGS[D.PREFIX + 'persistence_conflicting_units']
                   ['default'])
CONVERGED_UNITS = dict(FRESH_UNITS, **{'nvidia-persistenced.service': RUNNING,
                                       'nvidia-fabricmanager.service': RUNNING})


def _unit_keys(units):
    return dict((name if name.endswith('.service') else name + '.service', state) for name, state in units.items())


def converged_node():
    packages = {}
    for name in ('nvidia-open', 'kmod-nvidia-open-dkms', 'nvidia-driver', 'nvidia-persistenced',
                 'nvidia-fabricmanager', 'libnvidia-nscq'):
        packages[name] = [{'epoch': 3, 'version': VERSION, 'release': '1.el9', 'arch': 'x86_64'}]
    packages['dkms'] = [{'epoch': 0, 'version': '3.2.1', 'release': '1.el9', 'arch': 'noarch'}]
    return {'repos': {'cuda-rhel9': {'baseurl': P.CUDA_BASE + 'rhel9/x86_64/', 'enabled': True, 'gpgcheck': True,
                                     'gpgkey': P.CUDA_BASE + 'rhel9/x86_64/D42D0685.pub', 'file': 'x'},
                      'nodeprep-epel': {'baseurl': P.EPEL_URL.format(major=9, arch='x86_64'), 'enabled': True,
                                        'gpgcheck': True, 'gpgkey': P.EPEL_KEY.format(major=9), 'file': 'y'},
                      'crb': {'enabled': True, 'file': '/etc/yum.repos.d/rocky.repo'}},
            'packages': packages,
            'versionlock': ['{0}-3:{1}-1.el9.*'.format(n, VERSION) for n in sorted(packages)
                            if _driver_packages.NVIDIA_STACK_RE.match(n)],
            'versionlock_plugin': True, 'module_stream': '580-open'}


def fresh_node():
    return {'repos': {'crb': {'enabled': False, 'file': '/etc/yum.repos.d/rocky.repo'}}, 'packages': {},
            'versionlock': [], 'versionlock_plugin': False, 'module_stream': ''}


def facts(state='converged', **kw):
    """ansible_facts as the gather leaves them on an EL9 H100 node: 'converged' (driver 580 loaded, services
    running) or 'fresh' (no driver)."""
    converged = state == 'converged'
    kernel_state = {
        'running': K9, 'default': K9, 'pci': copy.deepcopy(H100_PCI), 'os': dict(EL9), 'devel': {K9: True},
        'nouveau': {'loaded': False, 'blacklisted': converged},
        'nvidia_module': dict(LOADED if converged else NOT_LOADED),
        'dkms': [{'module': 'nvidia-open', 'version': VERSION, 'kernel': K9, 'status': 'installed'}]
        if converged else [],
        'secure_boot': {'enabled': False, 'source': 'mokutil --sb-state', 'dkms_mok': {}},
        'driver_node': converged_node() if converged else fresh_node()}
    out = {'nodeprep_gathered': ['kernel', 'nvidia'], 'kernel_state': kernel_state,
           'nvidia': copy.deepcopy(SMI if converged else NO_SMI),
           'nodeprep_units': _unit_keys(CONVERGED_UNITS if converged else FRESH_UNITS),
           'nodeprep_files': dict((path, NO_FILE) for path in D.FILES), 'nodeprep_errors': {}}
    for key, value in kw.items():
        if key in kernel_state:
            kernel_state[key] = value
        else:
            out[key] = value
    return out


def make_plan(ansible_facts, given=None, check_mode=False, run=None):
    settings, problems = _plans.typed_settings('nvidia_driver', given or {})
    return _plans.plan_role('nvidia_driver', ansible_facts, settings, problems,
                            _plan.new_context(host='node1', check_mode=check_mode,
                                              extra={'run': {'nvidia_driver': run}} if run else None))


def driver_of(ansible_facts, given=None, check_mode=False, run=None):
    """The driver plan (_driver_plan.driver_plan) the role's plan is made from, with the same facts and settings."""
    settings = _plans.typed_settings('nvidia_driver', given or {})[0]
    wanted = dict(D.driver_facts(ansible_facts), host='node1')
    state = P.run_state(run)
    return P.driver_plan(wanted, D.plan_settings(settings), node=ansible_facts['kernel_state']['driver_node'],
                         stage=state['stage'], run=state, check_mode=check_mode)


# --------------------------------------------------------------------------------------- settings: one source

def _role_yaml(*parts):
    with open(os.path.join(ROOT, 'roles', 'nvidia_driver', *parts)) as handle:
        return yaml.safe_load(handle)


def test_argument_specs_are_the_settings():
    options = _role_yaml('meta', 'argument_specs.yml')['argument_specs']['main']['options']
    assert sorted(options) == sorted(D.SETTINGS)
    for name, spec in D.SETTINGS.items():
        option = dict(options[name])
        description = option.pop('description')
        assert ([description] if isinstance(description, str) else description) == spec['description'], name
        assert option == dict((k, v) for k, v in spec.items() if k != 'description' and
                              (v is not None or k != 'default')), name


def test_defaults_are_the_settings_defaults():
    defaults = _role_yaml('defaults', 'main.yml')
    assert sorted(defaults) == sorted(set(D.SETTINGS) - set(D.SHARED))
    for name, value in defaults.items():
        if name == D.PREFIX + 'reboot_ok':
            # Follows the collection-wide switch; the plan resolves it (reboot_ok), the default is None.
            assert value == '{{ nodeprep_reboot_ok | default(false) }}'
            assert D.SETTINGS[name]['default'] is None
        else:
            assert value == D.SETTINGS[name]['default'], name


def test_gather_asks_for_the_units_and_files_the_plan_reads():
    settings = _plans.typed_settings('nvidia_driver', {D.PREFIX + 'persistence_conflicting_units': 'nvidia-pm'})[0]
    request = D.gather(settings)
    assert request == dict(_plan.new_gather(), subsets=['kernel', 'nvidia'],
                           units=['nvidia-persistenced', 'nvidia-fabricmanager', 'nvidia-imex', 'nvidia-pm'],
                           files=['/etc/systemd/system/nvidia-persistenced.service.d',
                                  '/etc/systemd/system/nvidia-persistenced.service.d/nodeprep-persistence-mode.conf',
                                  '/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service',
                                  '/etc/modules-load.d/nodeprep-nvlsm.conf'])


# --------------------------------------------------------------------------------------- typed once (issue #22)

BOOL_SETTINGS = sorted(name for name, spec in D.SETTINGS.items() if spec['type'] == 'bool')


def test_every_bool_setting_given_as_text_false_is_false():
    given = dict((name, 'false') for name in BOOL_SETTINGS)
    settings, problems = _plans.typed_settings('nvidia_driver', given)
    assert problems == []
    assert dict((name, settings[name]) for name in BOOL_SETTINGS) == dict((name, False) for name in BOOL_SETTINGS)
    assert D.plan_settings(settings)['reboot_ok'] is False
    assert D.work_settings(settings)['blacklist_nouveau'] is False


@pytest.mark.parametrize('given, allowed', [
    ({'nodeprep_reboot_ok': 'false'}, False),
    ({'nodeprep_reboot_ok': 'no'}, False),
    ({'nodeprep_reboot_ok': 'true'}, True),
    ({D.PREFIX + 'reboot_ok': 'false'}, False),
    # What the role's defaults/main.yml gives once templated with -e nodeprep_reboot_ok=false.
    ({'nodeprep_reboot_ok': 'false', D.PREFIX + 'reboot_ok': 'false'}, False),
    ({'nodeprep_reboot_ok': 'true', D.PREFIX + 'reboot_ok': 'false'}, False),
    ({'nodeprep_reboot_ok': 'false', D.PREFIX + 'reboot_ok': 'true'}, True),
    ({}, False),
])
def test_a_reboot_only_when_allowed(given, allowed):
    # nouveau loaded: the driver needs a reboot.
    state = facts('converged')
    state['kernel_state']['nouveau'] = {'loaded': True, 'blacklisted': True}
    plan = make_plan(state, given)
    assert plan['problems'] == []
    # Before the reboot, the initramfs is rebuilt once more (only when the reboot is allowed).
    assert plan['reboot'] == {'needed': True, 'allowed': allowed, 'timeout': 1800,
                              'before': [{'argv': ['dracut', '--force', '--kver', K9], 'removes': '/usr/bin/dracut'}]
                              if allowed else [],
                              'why': ['nvidia_driver: nouveau is loaded (it is blacklisted and leaves at the next '
                                      'boot)']}
    assert driver_of(state, given)['reboot'] == {'needed': True, 'allowed': allowed, 'why': plan['reboot']['why']}
    assert D.plan_settings(plan['settings'])['reboot_ok'] is allowed
    assert plan['reasons'] == ['reboot: nvidia_driver: nouveau is loaded (it is blacklisted and leaves at the next '
                               'boot)']


def test_imex_and_persistenced_false_as_text_install_and_enable_nothing():
    given = {D.PREFIX + 'imex': 'false', D.PREFIX + 'persistenced': 'false'}
    plan = make_plan(facts('fresh'), given)
    driver = driver_of(facts('fresh'), given)
    assert driver['extras']['packages'] == ['nvidia-fabricmanager', 'libnvidia-nscq']
    assert driver['services'] == ['nvidia-fabricmanager']
    assert driver['persistenced']['enable'] is False
    assert driver['units_missing'] == ['nvidia-fabricmanager.service']
    assert plan['args']['extras'] == [{'name': ['nvidia-fabricmanager', 'libnvidia-nscq',
                                                'python3-dnf-plugin-versionlock']}]
    assert [unit['name'] for unit in plan['args']['services']] == ['nvidia-fabricmanager']
    given = {D.PREFIX + 'imex': 'true', D.PREFIX + 'persistenced': 'yes'}
    on = driver_of(facts('fresh'), given)
    assert on['extras']['packages'] == ['nvidia-persistenced', 'nvidia-imex', 'nvidia-fabricmanager',
                                        'libnvidia-nscq']
    assert on['services'] == ['nvidia-fabricmanager', 'nvidia-imex']
    assert on['persistenced']['enable'] is True
    assert [unit['name'] for unit in make_plan(facts('fresh'), given)['args']['services']] == [
        'nvidia-persistenced', 'nvidia-fabricmanager', 'nvidia-imex']


def test_a_value_that_does_not_type_is_a_problem_and_plans_nothing():
    plan = make_plan(facts('converged'), {D.PREFIX + 'imex': 'maybe'})
    assert len(plan['problems']) == 1
    assert plan['problems'][0].startswith('nodeprep_nvidia_driver_imex="maybe": ')
    assert plan['problems'][0].endswith('(role nvidia_driver: docs/roles/nvidia_driver.md)')
    assert plan['reasons'] == [] and plan['args'] == {}
    assert plan['run'] == ['invalid settings: ' + plan['problems'][0]]


# --------------------------------------------------------------------------------------- facts + settings -> plan

FRESH_REASONS = [
    'driver: not the wanted driver, or not loaded',
    'nouveau: not blacklisted',
    'repository: missing or different',
    'EPEL: missing or different',
    'module stream: 580-open',
    'extras: nvidia-persistenced, nvidia-fabricmanager, libnvidia-nscq',
    'versionlock: plugin or entries missing, or stale entries',
    'nvidia-persistenced: not enabled and running',
    'nvidia-fabricmanager: not enabled and running',
]


@pytest.mark.parametrize('name, state, given, reasons, reboot', [
    ('converged node: nothing to do', facts('converged'), {}, [], []),
    ('fresh node: everything to do', facts('fresh'), {}, FRESH_REASONS, []),
    ('a stopped fabric manager', facts('converged', nodeprep_units=_unit_keys(dict(
        CONVERGED_UNITS, **{'nvidia-fabricmanager.service': dict(RUNNING, active='failed', sub='failed')}))), {},
     ['nvidia-fabricmanager: not enabled and running'], []),
    ('a conflicting unit with conflicts disabled', facts('converged', nodeprep_units=_unit_keys(dict(
        CONVERGED_UNITS, **{'nvidia-pm.service': RUNNING}))), {}, ['persistence conflicts: nvidia-pm.service'], []),
    ('a conflicting unit ignored', facts('converged', nodeprep_units=_unit_keys(dict(
        CONVERGED_UNITS, **{'nvidia-pm.service': RUNNING}))),
     {D.PREFIX + 'persistence_conflicts': 'ignore'}, [], []),
    ('nouveau not blacklisted, blacklist off as text',
     facts('converged', nouveau={'loaded': False, 'blacklisted': False}),
     {D.PREFIX + 'blacklist_nouveau': 'false'}, [], []),
    # A GPU missing from nvidia-smi is readiness' gpu.count, not work: no run of the role brings it back (the role's
    # last task fails on it after its work: test_the_last_task_fails_on_missing_gpus).
    ('expected GPUs from the collection-wide setting given as text: no work',
     facts('converged'), {'nodeprep_expected_gpus': '8'}, [], []),
    ('a new kernel boots next: the loaded module stays until the reboot',
     facts('converged', default=K9_NEXT, devel={K9: True, K9_NEXT: True}), {},
     ['driver: not the wanted driver, or not loaded'], []),
])
def test_plan_table(name, state, given, reasons, reboot):
    plan = make_plan(state, given)
    assert plan['problems'] == [] and plan['errors'] == [] and plan['missing'] == [], name
    assert plan['reasons'] == reasons, name
    assert plan['reboot']['why'] == reboot, name
    assert plan['run'] == reasons, name


def test_the_last_task_fails_on_missing_gpus():
    plan = make_plan(facts('converged'), {'nodeprep_expected_gpus': '8'})
    assert plan['args']['verify'] == [
        'NVIDIA driver check failed: nvidia-smi lists 1 GPU(s) with driver 580.95.05; the PCI bus shows 1 GPU(s), '
        'nodeprep_expected_gpus=8; wanted driver branch 580 with open modules, loaded: 580.95.05 open.']
    assert make_plan(facts('converged'), {'nodeprep_expected_gpus': '1'})['args']['verify'] == []
    assert make_plan(facts('converged'), {'nodeprep_expected_gpus': '8', D.PREFIX + 'verify': 'no'})['args'][
        'verify'] == []


BRANCH_58 = ('nodeprep_nvidia_driver_branch=58 is not a driver branch; give its three-digit number, e.g. 580 '
             '(R580 LTS), 590, 595.')


@pytest.mark.parametrize('given, problems', [
    # 58 given as a number in YAML: typed to the string "58", then refused by the plan.
    ({D.PREFIX + 'branch': 58}, [BRANCH_58]),
    ({D.PREFIX + 'branch': '580', D.PREFIX + 'version': '570.172.08'},
     ['nodeprep_nvidia_driver_version=570.172.08 is not a version of branch nodeprep_nvidia_driver_branch=580; '
      'allowed: 580.<minor>[.<patch>] (e.g. 580.95.05) or empty for the newest of the branch.']),
    ({D.PREFIX + 'method': 'runfile'},
     ['nodeprep_nvidia_driver_method=runfile needs nodeprep_nvidia_driver_version (the exact version of the .run '
      'file, e.g. 580.95.05); it is empty.']),
])
def test_refusals_are_problems(given, problems):
    plan = make_plan(facts('converged'), given)
    assert plan['problems'] == problems and plan['errors'] == []
    assert plan['reasons'] == ['refused: ' + '; '.join(problems)]
    assert plan['run'] == ['invalid settings: ' + '; '.join(problems)] + plan['reasons']


RUBIN_SMI = {'present': True, 'error': None, 'driver_version': '615.71.09',
             'gpus': [{'index': 0, 'architecture': 'Rubin', 'pci_device_id': None}]}


@pytest.mark.parametrize('state, nvidia, given, check', [
    ('converged', SMI, {D.PREFIX + 'module_type': 'proprietary', D.PREFIX + 'branch': '620'}, 'proprietary_branch'),
    ('fresh', NO_SMI, {D.PREFIX + 'module_type': 'proprietary', D.PREFIX + 'branch': '620'}, 'proprietary_branch'),
    ('converged', RUBIN_SMI, {D.PREFIX + 'branch': '595'}, 'rubin'),
])
@pytest.mark.parametrize('check_mode', [False, True])
def test_branch_refusals_stop_the_role_before_anything_in_both_modes(state, nvidia, given, check, check_mode):
    """R28 and Rubin: the plan of the start refuses (a settings problem naming the host), in check mode as in a real
    run, so the role's first check fails the node before it installs anything."""
    plan = make_plan(facts(state, nvidia=copy.deepcopy(nvidia)), given, check_mode=check_mode)
    driver = driver_of(facts(state, nvidia=copy.deepcopy(nvidia)), given, check_mode=check_mode)
    assert sorted(driver['refused']) == [check]
    assert 'install' not in driver
    # Nothing for the tasks to loop over: the role fails at its first check.
    assert plan['args'] == {'runfile_url': plan['args']['runfile_url']} and plan['files'] == []
    assert plan['problems'] == [driver['refused'][check]] and plan['errors'] == []
    assert ' node1 ' in plan['problems'][0]
    assert plan['reasons'] == ['refused: ' + plan['problems'][0]]


def test_an_unsupported_platform_is_an_error():
    state = facts('converged')
    state['kernel_state']['os'] = {'os_family': 'Suse', 'distribution': 'SLES', 'distribution_version': '15.6',
                                   'distribution_major_version': '15', 'architecture': 'x86_64'}
    plan = make_plan(state)
    assert plan['problems'] == []
    assert plan['errors'] == ['gpufleet.nodeprep.nvidia_driver supports EL 8/9/10, Ubuntu 22.04/24.04 and Debian 12; '
                              'this host runs SLES 15.6 (os_family Suse).']


def test_the_driver_plan_of_the_start_is_what_the_args_say():
    given = {'nodeprep_reboot_ok': 'true'}
    plan = make_plan(facts('fresh'), given, check_mode=True)
    driver = driver_of(facts('fresh'), given, check_mode=True)
    assert (driver['stage'], driver['ok'], driver['installed_version']) == ('start', False, '')
    assert driver['boot_kernel'] == K9
    assert driver['predict']['packages'] is True
    assert driver['install']['packages'] == ['nvidia-open']
    # Check mode on a fresh node: the repository is not there, so the installation is predicted, not run.
    assert plan['args']['install'] == [] and plan['args']['predict']['install'] == [D.INSTALL_TASK]
    # What the later stages hand back: the installation predicted, the nouveau blacklist written and the initramfs
    # rebuilt before them.
    assert plan['args']['run'] == {'stage': 'start', 'start_version': '', 'installing': True, 'modprobe': {},
                                   'files': ['/etc/modprobe.d/blacklist-nouveau.conf'], 'initramfs': True}
    assert D.plan_settings(plan['settings']) == {
        'method': 'repo', 'source': 'nvidia', 'branch': '580', 'version': '', 'module_type': 'open', 'package_set': 'full',
        'fabricmanager': 'auto', 'nvlsm': 'auto', 'nscq': True, 'imex': False, 'persistenced': True,
        'persistence_conflicting_units': ['nvidia-persistence-mode.service', 'nvidia-persistence.service',
                                          'nvidia-pm.service', 'nvidia-smi-pm.service'],
        'repo_url': '', 'repo_gpgcheck': True, 'repo_gpgkey': '', 'epel': 'auto', 'epel_url': '',
        'epel_gpgkey': '', 'open_required_device_ids': [], 'reboot_ok': True}
    assert plan['args']['runfile_url'] == 'https://us.download.nvidia.com/tesla//NVIDIA-Linux-x86_64-.run'


def runfile_facts(fetched=False):
    """A fresh node with the files the runfile method gathers: the unit written for it, the runfile (a glob)."""
    state = facts('fresh')
    state['nodeprep_files'][P.RUNFILE_UNIT] = NO_FILE
    state['nodeprep_files'][D.RUNFILE_DIR] = NO_FILE
    state['nodeprep_file_patterns'] = [D.RUNFILE_DIR + '/NVIDIA-Linux-*-580.95.05.run']
    if fetched:
        state['nodeprep_files'][D.RUNFILE_DIR + '/NVIDIA-Linux-x86_64-580.95.05.run'] = _file_state('x', '0755')
    return state


def test_runfile_url_default_and_given():
    given = {D.PREFIX + 'method': 'runfile', D.PREFIX + 'version': '580.95.05'}
    plan = make_plan(runfile_facts(), given)
    assert plan['args']['runfile_url'] == ('https://us.download.nvidia.com/tesla/580.95.05/'
                                           'NVIDIA-Linux-x86_64-580.95.05.run')
    assert driver_of(runfile_facts(), given)['runfile']['argv'][1] == (
        '/var/cache/nodeprep/NVIDIA-Linux-x86_64-580.95.05.run')
    assert plan['args']['fetch'] == [{'url': plan['args']['runfile_url'], 'checksum': None, 'mode': '0755',
                                      'dest': '/var/cache/nodeprep/NVIDIA-Linux-x86_64-580.95.05.run'}]
    assert plan['args']['runfile_run'][0]['argv'][:2] == ['sh', '/var/cache/nodeprep/NVIDIA-Linux-x86_64-580.95.05.run']
    given = make_plan(runfile_facts(), {D.PREFIX + 'method': 'runfile', D.PREFIX + 'version': '580.95.05',
                                        D.PREFIX + 'runfile_url': 'http://mirror/x.run'})
    assert given['args']['runfile_url'] == 'http://mirror/x.run'


@pytest.mark.parametrize('fetched', [False, True])
def test_check_mode_runs_the_runfile_only_once_it_is_fetched(fetched):
    """The installer cannot run in check mode before check mode's fetch: it is predicted then; a runfile already
    there is run by the command itself (check mode reports it)."""
    plan = make_plan(runfile_facts(fetched), {D.PREFIX + 'method': 'runfile', D.PREFIX + 'version': '580.95.05'},
                     check_mode=True)
    assert (plan['args']['predict']['install'] == [D.RUNFILE_TASK]) is not fetched
    assert bool(plan['args']['runfile_run']) is fetched


def test_kernel_facts_that_could_not_be_read_fail_the_role():
    plan = make_plan(facts('converged', nodeprep_errors={'kernel': 'dkms status timed out'}))
    assert plan['errors'] == ['The kernel facts could not be read: dkms status timed out']
    assert plan['reasons'] == [] and plan['files'] == [] and list(plan['args']) == ['runfile_url']
    assert plan['run'] == ['The kernel facts could not be read: dkms status timed out']


def test_without_the_driver_node_state_the_role_fails():
    """No fallback: a gather that did not read the driver packages is an error of the node, named (issue 27)."""
    plan = make_plan(facts('converged', driver_node=None))
    assert plan['errors'] == ['the driver packages of this node were not read (kernel_state.driver_node; the gather '
                              'reads them on the OSes whose /etc/os-release it knows, see its warnings)']
    assert plan['reasons'] == [] and plan['files'] == [] and list(plan['args']) == ['runfile_url']


def test_an_os_the_gather_does_not_know_is_an_error():
    state = facts('converged')
    del state['kernel_state']['os']
    plan = make_plan(state)
    assert plan['errors'][0].startswith('gpufleet.nodeprep.nvidia_driver supports EL 8/9/10, Ubuntu 22.04/24.04 and '
                                        'Debian 12; the /etc/os-release of this node names none of them')
    assert plan['reasons'] == []


def test_facts_not_gathered_are_missing():
    state = facts('converged', nodeprep_gathered=['kernel'])
    del state['nodeprep_units']['nvidia-imex.service']
    plan = make_plan(state)
    assert plan['missing'] == ['subsets: nvidia', 'units: nvidia-imex']
    assert plan['reasons'] == [] and plan['run'] == ['facts to gather: subsets: nvidia; units: nvidia-imex']


# --------------------------------------------------------------------------------------- idempotence

def _file_state(content=None, mode='0644', kind='file', target=None):
    return {'exists': True, 'type': kind, 'mode': mode, 'uid': 0, 'gid': 0,
            'sha1': hashlib.sha1(content.encode('utf-8')).hexdigest() if content is not None else None,  # nosec
            'target': target}


def test_the_converged_state_of_a_fresh_plan_has_no_reasons():
    """Apply what the fresh node's plan installs and enables to the fake node state, plan again: nothing to do."""
    first = driver_of(facts('fresh'))
    state = facts('converged')
    units = dict(FRESH_UNITS)
    for name in first['services'] + (['nvidia-persistenced'] if first['persistenced']['enable'] else []):
        units[name + '.service'] = RUNNING
    state['nodeprep_units'] = _unit_keys(units)
    again = make_plan(state)
    assert again['reasons'] == [] and again['drift'] == []


# --------------------------------------------------------------------------------------- the stages of a run

def _task_names(role):
    names = []

    def walk(tasks):
        for task in tasks or []:
            names.append(task.get('name'))
            walk(task.get('block'))
    for name in sorted(os.listdir(os.path.join(ROOT, 'roles', role, 'tasks'))):
        walk(_role_yaml('tasks', name) if role == 'nvidia_driver' else [])
    return names


def test_every_task_check_mode_predicts_is_a_task_of_the_role():
    """predict.yml reports a predicted task under the real task's name: the names are the tasks'."""
    names = _task_names('nvidia_driver')
    for task in D.PREDICTED_TASKS:
        assert names.count(task) == 1, task


def _stage(state, plan, given=None, check_mode=False, **run):
    """The plan of the next stage, as the role asks for it: the run the last plan handed back, and what changed."""
    return make_plan(state, given, check_mode=check_mode, run=dict(plan['args']['run'], **run))


def test_check_mode_on_a_fresh_node_predicts_each_task_once():
    """Check mode cannot install from the repository it did not define: the installation is predicted; the plan
    after it (same facts, the run saying the driver is being installed) predicts the extras, the locks and the
    services, and tells the settings roles the driver is pending."""
    given = {'nodeprep_reboot_ok': 'true'}
    start = make_plan(facts('fresh'), given, check_mode=True)
    assert start['args']['predict'] == {'install': [D.INSTALL_TASK],
                                        'extras': [D.EXTRAS_TASK, D.LOCK_TASK, D.SERVICES_TASK]}
    assert [f['path'] for f in start['files'] if f['change']] == ['/etc/modprobe.d/blacklist-nouveau.conf']
    assert start['args']['after_files'] == [{'argv': ['dracut', '--force', '--kver', K9], 'removes': '/usr/bin/dracut'}]
    assert [r['name'] for r in start['args']['repositories']] == ['nodeprep-epel', 'cuda-rhel9']
    assert start['args']['streams'] == [['dnf', '-y', 'module', 'enable', 'nvidia-driver:580-open']]
    installed = _stage(facts('fresh'), start, given, check_mode=True, stage='installed')
    assert installed['args']['predict'] == {'install': [], 'extras': [D.EXTRAS_TASK, D.LOCK_TASK, D.SERVICES_TASK]}
    assert installed['args']['extras'] == [{'name': ['python3-dnf-plugin-versionlock']}]
    assert installed['args']['modprobe'] == [['modprobe', 'nvidia']]
    assert installed['args']['pending'] == {'persistenced': True, 'imex': False, 'flavour': 'open', 'branch': '580'}
    assert installed['args']['stop'] == []


def test_a_real_run_plans_each_stage_from_what_the_node_reads():
    fresh = make_plan(facts('fresh'))
    assert fresh['args']['predict'] == {'install': [], 'extras': []}
    assert fresh['args']['install'] == [{'name': ['nvidia-open']}]
    assert fresh['args']['pending'] is None
    # Installed, not loaded yet: modprobe next; its failure becomes a reboot reason (never allowed from "false").
    state = facts('converged', nvidia=copy.deepcopy(NO_SMI), nvidia_module=dict(NOT_LOADED))
    installed = _stage(state, fresh, {'nodeprep_reboot_ok': 'false'}, stage='installed', installing=True)
    assert installed['args']['modprobe'] == [['modprobe', 'nvidia']]
    failed = _stage(state, installed, {'nodeprep_reboot_ok': 'false'}, modprobe={
        'rc': 1, 'stdout': '', 'stderr': 'modprobe: ERROR: could not insert nvidia: Device busy\n'})
    assert failed['reboot']['why'] == [
        'nvidia_driver: modprobe nvidia failed: modprobe: ERROR: could not insert nvidia: Device busy']
    assert failed['reboot']['allowed'] is False and failed['args']['modprobe'] == []
    assert driver_of(state, {'nodeprep_reboot_ok': 'false'}, run=failed['args']['run'])['reboot']['why'] == \
        failed['reboot']['why']


def test_a_reboot_that_did_not_load_the_driver_is_an_error():
    state = facts('converged', nvidia=copy.deepcopy(NO_SMI), nvidia_module=dict(NOT_LOADED))
    plan = make_plan(state, run={'stage': 'rebooted', 'start_version': ''})
    assert plan['errors'] == ['The node rebooted but the installed NVIDIA driver 580.95.05 is not loaded:  (NVIDIA '
                              'module loaded=False version=none). The role does not reboot again.']
    assert make_plan(facts('converged'), run={'stage': 'rebooted'})['errors'] == []


def test_persistenced_restarts_when_its_drop_in_was_written_in_this_run():
    ubuntu = facts('converged')
    plan = make_plan(ubuntu, run={'stage': 'installed', 'files': [P.PERSISTENCED_DROPIN]})
    # EL has no drop-in: started, never restarted.
    assert plan['args']['services'][0] == {'name': 'nvidia-persistenced', 'enabled': True, 'state': 'started',
                                           'daemon_reload': False}
