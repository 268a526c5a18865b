# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The dcgm role's decision table (plugins/module_utils/plans/_plan_dcgm.py): facts + settings -> plan."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_dcgm as p
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as RF

CUDA12 = 'datacenter-gpu-manager-4-cuda12'
CUDA13 = 'datacenter-gpu-manager-4-cuda13'
CORE = 'datacenter-gpu-manager-4-core'
RUNNING = {'load': 'loaded', 'active': 'active', 'sub': 'running', 'enabled': 'enabled'}
STOPPED = {'load': 'loaded', 'active': 'inactive', 'sub': 'dead', 'enabled': 'disabled'}
NOT_FOUND = {'load': 'not-found', 'active': 'inactive', 'sub': 'dead', 'enabled': None}


def facts(family='el', cuda='13.0', driver='580.105.08', packages=None, unit=None, locks=(), holds=(), gpus=8):
    os_info = ({'os_family': 'RedHat', 'distribution_major_version': '9', 'distribution': 'Rocky'} if family == 'el'
               else {'os_family': 'Debian', 'distribution_major_version': '24', 'distribution': 'Ubuntu'})
    node = {'versionlock': list(locks), 'versionlock_plugin': True} if family == 'el' else {'apt_holds': list(holds)}
    # The gather's driver_node package list (_package_db.parse_rpm / parse_dpkg records), DCGM's among the others.
    records = {'nvidia-open': [{'epoch': 3, 'version': '580.105.08', 'release': '1.el9', 'arch': 'x86_64'}]}
    for name, text in (packages or {}).items():
        epoch, rest = text.split(':')
        version, release = rest.rsplit('-', 1)
        records[name] = [{'epoch': int(epoch), 'version': version, 'release': release, 'arch': 'x86_64'}]
    node['packages'] = records
    return {
        'nodeprep_gathered': ['kernel', 'nvidia', 'units'],
        'kernel_state': {'os': os_info, 'pci': {'gpu_count': gpus}, 'driver_node': node,
                         'nvidia_module': {'loaded': driver is not None, 'version': driver}},
        'nvidia': ({'present': True, 'cuda_version': cuda, 'driver_version': driver, 'gpus': []} if cuda else
                   {'present': False, 'error': 'nvidia-smi not found', 'cuda_version': None, 'gpus': []}),
        # The gather reads DCGM 3.x's deprecated dcgm.service too (not installed here).
        'nodeprep_units': {p.SERVICE: dict(unit if unit is not None else NOT_FOUND), 'dcgm.service': dict(NOT_FOUND)},
    }


def settings(**given):
    out = _plan.defaults(p)
    out['nodeprep_dcgm_install'] = True
    out.update(given)
    return out


def plan(the_facts, the_settings, **context):
    return _plan.plan_with(p, the_facts, the_settings, (), _plan.new_context(host='gpu-a01', **context))


INSTALLED = {CUDA13: '1:4.5.2-1', CORE: '1:4.5.2-1'}
LOCKS = ['{0}-1:4.5.2-1.*'.format(CUDA13), '{0}-1:4.5.2-1.*'.format(CORE)]

# (name, facts, settings, install names or None, lock {add, remove, hold, unhold}, service args?, reasons)
TABLE = [
    ('fresh EL node, driver 580 (CUDA 13.0)', facts(), settings(),
     [CUDA13, CORE], {'add': [], 'remove': [], 'hold': [], 'unhold': []}, True,
     ['install: datacenter-gpu-manager-4-cuda13 is not installed (nvidia-smi: CUDA Version 13.0)',
      'nvidia-dcgm.service: inactive, not enabled (wanted enabled and running)']),
    ('fresh EL node, driver 570 (CUDA 12.8)', facts(cuda='12.8', driver='570.172.08'), settings(),
     [CUDA12, CORE], {'add': [], 'remove': [], 'hold': [], 'unhold': []}, True, None),
    ('a version asked for, Debian', facts(family='debian'), settings(nodeprep_dcgm_version='4.5.2'),
     [CUDA13 + '=1:4.5.2-1', CORE + '=1:4.5.2-1'], {'add': [], 'remove': [], 'hold': [], 'unhold': []}, True, None),
    ('a version asked for, EL', facts(), settings(nodeprep_dcgm_version='4.5.2'),
     [CUDA13 + '-4.5.2', CORE + '-4.5.2'], {'add': [], 'remove': [], 'hold': [], 'unhold': []}, True, None),
    ('converged EL node: nothing to do', facts(packages=INSTALLED, unit=RUNNING, locks=LOCKS), settings(),
     None, {'add': [], 'remove': [], 'hold': [], 'unhold': []}, False, []),
    ('converged Debian node: nothing to do', facts(family='debian', packages=INSTALLED, unit=RUNNING,
                                                   holds=[CUDA13, CORE, 'nvidia-open']), settings(),
     None, {'add': [], 'remove': [], 'hold': [], 'unhold': []}, False, []),
    ('installed, not locked, host engine stopped', facts(packages=INSTALLED, unit=STOPPED), settings(),
     None, {'add': LOCKS, 'remove': [], 'hold': [], 'unhold': []}, True,
     ['versionlock: datacenter-gpu-manager-4-cuda13-1:4.5.2-1.* is not locked',
      'versionlock: datacenter-gpu-manager-4-core-1:4.5.2-1.* is not locked',
      'nvidia-dcgm.service: inactive, disabled (wanted enabled and running)']),
    ('installed and not held, Debian', facts(family='debian', packages=INSTALLED, unit=RUNNING), settings(),
     None, {'add': [], 'remove': [], 'hold': [CUDA13, CORE], 'unhold': []}, False,
     ['apt hold: datacenter-gpu-manager-4-cuda13 is not held', 'apt hold: datacenter-gpu-manager-4-core is not held']),
    ('an older version installed and locked, a newer one asked for (EL)',
     facts(packages={CUDA13: '1:4.4.1-1', CORE: '1:4.4.1-1'}, unit=RUNNING,
           locks=[CUDA13 + '-1:4.4.1-1.*', CORE + '-1:4.4.1-1.*', 'nvidia-open-3:580.105.08-1.el9.*']),
     settings(nodeprep_dcgm_version='4.5.2'),
     [CUDA13 + '-4.5.2', CORE + '-4.5.2'],
     {'add': [], 'remove': [CUDA13 + '-1:4.4.1-1.*', CORE + '-1:4.4.1-1.*'], 'hold': [], 'unhold': []}, False,
     ['install: datacenter-gpu-manager-4-cuda13 is 1:4.4.1-1, wanted 4.5.2 (nodeprep_dcgm_version)']),
    ('held at an older version, a newer one asked for (Debian)',
     facts(family='debian', packages={CUDA13: '1:4.4.1-1', CORE: '1:4.4.1-1'}, unit=RUNNING, holds=[CUDA13, CORE]),
     settings(nodeprep_dcgm_version='4.5.2'),
     [CUDA13 + '=1:4.5.2-1', CORE + '=1:4.5.2-1'], {'add': [], 'remove': [], 'hold': [], 'unhold': [CUDA13, CORE]},
     False, None),
    ('no lock wanted, no service wanted', facts(packages=INSTALLED, unit=STOPPED),
     settings(nodeprep_dcgm_versionlock=False, nodeprep_dcgm_service=False),
     None, {'add': [], 'remove': [], 'hold': [], 'unhold': []}, False, []),
    ('the driver is loaded but nvidia-smi fails: the branch decides', facts(cuda=None, driver='575.57.08'), settings(),
     [CUDA12, CORE], {'add': [], 'remove': [], 'hold': [], 'unhold': []}, True,
     ['install: datacenter-gpu-manager-4-cuda12 is not installed (driver 575.57.08 (branch 575))',
      'nvidia-dcgm.service: inactive, not enabled (wanted enabled and running)']),
    ('the CUDA major given overrides the driver', facts(), settings(nodeprep_dcgm_cuda_major=12),
     [CUDA12, CORE], {'add': [], 'remove': [], 'hold': [], 'unhold': []}, True, None),
]


@pytest.mark.parametrize('name, the_facts, the_settings, install, lock, service, reasons', TABLE,
                         ids=[row[0] for row in TABLE])
def test_decision_table(name, the_facts, the_settings, install, lock, service, reasons):
    out = plan(the_facts, the_settings)
    assert (out['problems'], out['errors'], out['missing']) == ([], [], []), name
    assert (out['args'].get('install') or {}).get('name') == install
    assert dict((key, out['args']['lock'][key]) for key in ('add', 'remove', 'hold', 'unhold')) == lock
    assert ('service' in out['args']) == service
    if reasons is not None:
        assert out['reasons'] == reasons
    # A node with nothing to do has no play of the role in site.yml.
    assert bool(out['run']) == bool(out['reasons'] or out['reports'])


def test_installing_without_a_version_plans_the_lock_again_afterwards():
    out = plan(facts(), settings())
    assert out['args']['relock'] is True
    assert plan(facts(), settings(nodeprep_dcgm_versionlock=False))['args']['relock'] is False


def test_off_by_default_and_then_nothing_is_gathered_or_done():
    defaults = _plan.defaults(p)
    assert defaults['nodeprep_dcgm_install'] is False
    assert p.gather(defaults) == _plan.new_gather()
    out = plan({}, defaults)
    assert (out['reasons'], out['run'], out['args']) == ([], [], {})


def test_a_node_without_gpu_gets_no_dcgm():
    """The GPU-node rule (rules/_gpu_node.py, applied by _plan.plan_with) decides, not the dcgm plan itself: no work,
    the one line, and gpu.dcgm_diag skips; site.yml does not run the role there (``run`` empty)."""
    out = plan(facts(gpus=0), settings())
    assert out['reasons'] == [] and out['run'] == [] and out['drift'] == []
    assert out['reports'] == [_gpu_node.skip_line({'why': 'no NVIDIA GPU on the PCI bus'})]
    assert out['checks'][p.CHECK]['skip'] == 'no NVIDIA GPU on the PCI bus'


@pytest.mark.parametrize('value', [False, 'false', 'no', '0'])
def test_a_node_marked_not_a_gpu_node_gets_no_dcgm_whatever_its_bus_shows(value):
    typed, problems = _plans.typed_settings('dcgm', {'nodeprep_dcgm_install': True, 'nodeprep_gpu_node': value})
    out = plan(facts(gpus=8), typed)
    assert problems == [] and out['reasons'] == [] and out['run'] == [] and out['errors'] == []
    assert out['reports'] == [_gpu_node.skip_line({'why': 'nodeprep_gpu_node is false'})]
    assert out['checks'][p.CHECK]['skip'] == 'nodeprep_gpu_node is false'


def test_other_cuda_packages_are_reported_and_left_alone():
    out = plan(facts(packages=dict(INSTALLED, **{CUDA12: '1:4.5.2-1'}), unit=RUNNING, locks=LOCKS), settings())
    assert out['reasons'] == []
    assert out['reports'] == ['DCGM on gpu-a01: datacenter-gpu-manager-4-cuda12 is also installed (left alone; '
                              'datacenter-gpu-manager-4-cuda13 matches nvidia-smi: CUDA Version 13.0).']


def test_without_a_driver_the_cuda_major_is_asked_for():
    out = plan(facts(cuda=None, driver=None), settings())
    assert out['errors'] == ['DCGM on gpu-a01: cannot tell the CUDA major of the driver (no driver answers '
                             '(nvidia-smi: nvidia-smi not found) and no nvidia module is loaded); set '
                             'nodeprep_dcgm_cuda_major (allowed: 11, 12, 13).']


def test_check_mode_with_the_driver_of_this_run_predicts():
    out = plan(facts(cuda=None, driver=None), settings(), check_mode=True, driver_pending={'persistenced': True})
    assert out['errors'] == []
    assert out['args']['predict'] is True
    assert out['reasons'] == ['install: DCGM (the package of the CUDA major of the driver installed in this run)']
    # The keys the role's check-mode tasks read: the lock after the installation, the host engine, the family.
    assert (out['args']['relock'], out['args']['family']) == (True, 'el')
    assert out['args']['service'] == {'name': 'nvidia-dcgm.service', 'enabled': True, 'state': 'started'}
    bare = plan(facts(cuda=None, driver=None), settings(nodeprep_dcgm_versionlock=False, nodeprep_dcgm_service=False),
                check_mode=True, driver_pending={'persistenced': True})
    assert bare['args']['relock'] is False and 'service' not in bare['args']


def test_a_cuda_dcgm4_has_no_package_for():
    out = plan(facts(cuda='14.0', driver='610.10'), settings())
    assert out['errors'] == ['DCGM on gpu-a01: the driver supports CUDA 14 (nvidia-smi: CUDA Version 14.0), DCGM 4 '
                             'has packages for CUDA 11, 12, 13; set nodeprep_dcgm_cuda_major.']


def test_unsupported_os():
    the_facts = facts()
    the_facts['kernel_state']['os'] = {'os_family': 'Suse', 'distribution_major_version': '15'}
    assert plan(the_facts, settings())['errors'] == [
        'DCGM on gpu-a01: the OS family Suse is not one the role installs on (allowed: EL 8/9/10, Debian and Ubuntu).']


@pytest.mark.parametrize('name, value, words', [
    ('nodeprep_dcgm_version', '4.5', None),
    ('nodeprep_dcgm_version', 'latest', 'nodeprep_dcgm_version="latest": a DCGM version such as 4.5.2, or \'\' for '
                                        'the newest'),
    ('nodeprep_dcgm_version', '4.5.2-1', 'nodeprep_dcgm_version="4.5.2-1": a DCGM version such as 4.5.2, or \'\' '
                                         'for the newest'),
    ('nodeprep_dcgm_cuda_major', 10, 'nodeprep_dcgm_cuda_major=10: one of 11, 12, 13, or null to take it from the '
                                     'driver'),
])
def test_settings_are_checked(name, value, words):
    out = plan(facts(), settings(**{name: value}))
    if words is None:
        assert out['problems'] == []
    else:
        assert out['problems'] == [words]
        assert out['reasons'] == []


@pytest.mark.parametrize('branch, major', [(450, 11), (470, 11), (520, 11), (525, 12), (535, 12), (575, 12),
                                           (580, 13), (590, 13), (418, None)])
def test_branch_to_cuda_major(branch, major):
    assert p.cuda_major_of_branch(branch) == major


def test_missing_facts_are_asked_for():
    the_facts = copy.deepcopy(facts())
    del the_facts['nodeprep_units']
    the_facts['nodeprep_gathered'].remove('units')
    out = plan(the_facts, settings())
    assert out['missing'] and out['reasons'] == []


def test_the_versionlock_plugin_is_installed_where_missing():
    the_facts = facts(packages=INSTALLED, unit=RUNNING)
    the_facts['kernel_state']['driver_node']['versionlock_plugin'] = False
    out = plan(the_facts, settings())
    assert out['args']['lock']['plugin'] == 'python3-dnf-plugin-versionlock'
    assert plan(facts(packages=INSTALLED, unit=RUNNING, locks=LOCKS), settings())['args']['lock']['plugin'] is None


# ---------------------------------------------------------------------------------------------------------------------
# DCGM 3.x installed (issue 30): refused by default, replaced when allowed

DCGM3 = {'datacenter-gpu-manager': '1:3.3.9-1'}


def dcgm3_facts(family='el', unit=None, deprecated=None, **kw):
    """A node with DCGM 3.x (NVIDIA/DCGM v3.3.9: datacenter-gpu-manager, epoch 1) and its host engine running
    (``unit``, default RUNNING; the deprecated dcgm.service: ``deprecated``, default not installed)."""
    the_facts = facts(family=family, packages=DCGM3, unit=RUNNING if unit is None else unit, **kw)
    the_facts['nodeprep_units']['dcgm.service'] = dict(NOT_FOUND if deprecated is None else deprecated)
    return the_facts


@pytest.mark.parametrize('family', ['el', 'debian'])
def test_dcgm3_is_refused_naming_both(family):
    """Before: DCGM 3.x was not read at all; the role installed DCGM 4 over it (dnf: conflict error; apt: DCGM 3 and
    its unit removed without a word)."""
    out = plan(dcgm3_facts(family), settings())
    assert out['reasons'] == [] and 'install' not in out['args']
    assert len(out['errors']) == 1
    msg = out['errors'][0]
    for part in ('DCGM on gpu-a01: DCGM 3.x is installed (datacenter-gpu-manager 1:3.3.9-1, nvidia-dcgm.service '
                 'enabled or running)', 'installs DCGM 4 (datacenter-gpu-manager-4-cuda13 with '
                 'datacenter-gpu-manager-4-core)', 'conflicts with it', 'nodeprep_dcgm_replace_v3=true',
                 'nodeprep_dcgm_install=false'):
        assert part in msg, part


def test_the_gather_reads_the_dcgm3_package_and_units():
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._driver_packages import keep_package
    assert keep_package('datacenter-gpu-manager') and keep_package(CORE)
    assert p.gather(settings())['units'] == ['nvidia-dcgm.service', 'dcgm.service']
    assert p.installed_packages(dcgm3_facts())['datacenter-gpu-manager'] == '1:3.3.9-1'


@pytest.mark.parametrize('family, locks, holds, unhold, unlock', [
    ('el', LOCKS[:1] + ['datacenter-gpu-manager-1:3.3.9-1.*'], (), [], ['datacenter-gpu-manager-1:3.3.9-1.*']),
    ('debian', (), ['datacenter-gpu-manager'], ['datacenter-gpu-manager'], []),
])
def test_dcgm3_replaced_when_allowed(family, locks, holds, unhold, unlock):
    the_facts = dcgm3_facts(family, deprecated=STOPPED, locks=locks, holds=holds)
    out = plan(the_facts, settings(nodeprep_dcgm_replace_v3=True))
    assert out['errors'] == []
    assert out['args']['replace'] == {'family': family, 'units': ['nvidia-dcgm.service'], 'unhold': unhold,
                                      'unlock': unlock, 'packages': ['datacenter-gpu-manager']}
    assert out['args']['install']['name'] == [CUDA13, CORE] and out['args']['predict_install'] is False
    # The unit the gather saw is DCGM 3's: DCGM 4's is enabled and started after the replacement.
    assert out['args']['service'] == {'name': 'nvidia-dcgm.service', 'enabled': True, 'state': 'started'}
    assert out['reasons'][0] == ('replace: DCGM 3.x (datacenter-gpu-manager 1:3.3.9-1) is installed; '
                                 'nodeprep_dcgm_replace_v3=true: stopped, removed, DCGM 4 installed')
    # Check mode: the installation and the host engine are predicted (dnf cannot resolve DCGM 4 beside DCGM 3).
    assert plan(the_facts, settings(nodeprep_dcgm_replace_v3=True), check_mode=True)['args']['predict_install']


def test_the_deprecated_dcgm3_unit_is_stopped_too():
    out = plan(dcgm3_facts(unit=STOPPED, deprecated=RUNNING), settings(nodeprep_dcgm_replace_v3=True))
    assert out['args']['replace']['units'] == ['dcgm.service']


# ---------------------------------------------------------------------------------------------------------------------
# Agreement with readiness (tests/unit/plugins/module_utils/plans/agreement.py): the plan owns gpu.dcgm_diag; the role's
# work is its fixable drift, its refusals fail it, DCGM's verdict (the diagnostic the readiness gather ran,
# nodeprep_dcgm) is drift no run of the role fixes.

NO_ENGINE = ('Error: unable to establish a connection to the specified host: localhost\n'
             'Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n')


def diag(passing=True):
    """What the readiness gather ran for gpu.dcgm_diag: the 8-GPU DCGM 4.x capture (test_readiness_facts.dcgm_passing),
    with GPU 3 failing when ``passing`` is false."""
    probe = RF.dcgm_passing()
    if not passing:
        probe['diag']['stdout'] = probe['diag']['stdout'].replace(
            '"entity_id" : 3,\n' + ' ' * 64 + '"status" : "Pass"',
            '"entity_id" : 3,\n' + ' ' * 64 + '"status" : "Fail", "warnings": [{"warning": "GPU 3 failed", '
            '"error_id": 61, "error_category": 1, "error_severity": 2}]')
        probe['diag']['rc'] = 205
    return probe


def with_diag(the_facts, probe):
    out = copy.deepcopy(the_facts)
    out['nodeprep_dcgm'] = probe
    return out


CONVERGED = facts(packages=INSTALLED, unit=RUNNING, locks=LOCKS)
OFF = {'enabled': True, 'level': 1, 'timeout': 300, 'dcgmi': None}
STOPPED_ENGINE = {'enabled': True, 'level': 1, 'timeout': 300, 'dcgmi': '/usr/bin/dcgmi',
                  'discovery': {'rc': 235, 'stdout': NO_ENGINE, 'stderr': '', 'timed_out': False}}

# (name, facts, settings) -> (work, refuses, status of gpu.dcgm_diag)
AGREEMENT = [
    ('not managed, diagnostic not asked', facts(), _plan.defaults(p), (False, False, 'skip')),
    ('not managed, DCGM the site installed passes', with_diag(facts(), diag()), _plan.defaults(p),
     (False, False, 'pass')),
    ('not managed, no DCGM on the node', with_diag(facts(), OFF), _plan.defaults(p), (False, False, 'skip')),
    # the diagnostic asked for and the host engine stopped: not proven, so it fails (issue: it skipped before)
    ('not managed, host engine stopped', with_diag(facts(), STOPPED_ENGINE), _plan.defaults(p),
     (False, False, 'fail')),
    ('not managed, a GPU fails the diagnostic', with_diag(facts(), diag(False)), _plan.defaults(p),
     (False, False, 'fail')),
    ('fresh node: DCGM to install, host engine to start', facts(), settings(), (True, False, 'fail')),
    ('fresh node, diagnostic asked: no dcgmi yet', with_diag(facts(), OFF), settings(), (True, False, 'fail')),
    ('converged, diagnostic not asked', CONVERGED, settings(), (False, False, 'skip')),
    ('converged, diagnostic passes', with_diag(CONVERGED, diag()), settings(), (False, False, 'pass')),
    ('converged, a GPU fails the diagnostic', with_diag(CONVERGED, diag(False)), settings(), (False, False, 'fail')),
    ('installed, host engine stopped', with_diag(facts(packages=INSTALLED, unit=STOPPED, locks=LOCKS), STOPPED_ENGINE),
     settings(), (True, False, 'fail')),
    ('installed, unit active, host engine not answering', with_diag(CONVERGED, STOPPED_ENGINE), settings(),
     (False, False, 'fail')),
    ('installed, not locked', facts(packages=INSTALLED, unit=RUNNING), settings(), (True, False, 'fail')),
    ('no driver: the CUDA major cannot be told', facts(cuda=None, driver=None), settings(), (False, True, 'fail')),
    ('an OS the role does not install on', dict(facts(), kernel_state=dict(facts()['kernel_state'], os={
        'os_family': 'Suse', 'distribution_major_version': '15'})), settings(), (False, True, 'fail')),
    ('a version that is not one', facts(), settings(nodeprep_dcgm_version='latest'), (False, True, 'fail')),
    ('no NVIDIA GPU on the PCI bus', with_diag(facts(gpus=0), diag(False)), settings(), (False, False, 'skip')),
    ('DCGM on a node marked nodeprep_gpu_node: false', with_diag(facts(), diag(False)),
     settings(nodeprep_gpu_node=False), (False, False, 'skip')),
]


@pytest.mark.parametrize('name, the_facts, the_settings, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_readiness_agrees_with_the_plan(name, the_facts, the_settings, want):
    work, refuses, status = want
    agreement.assert_agrees(name, plan(the_facts, the_settings), p.CHECKS, work, refuses, {p.CHECK: status})


def test_the_roles_work_is_what_gpu_dcgm_diag_says():
    check = agreement.verdicts(plan(facts(), settings()), p.CHECKS)[p.CHECK]
    assert check == ('fail', 'install: datacenter-gpu-manager-4-cuda13 is not installed (nvidia-smi: CUDA Version 13.0); '
                             'nvidia-dcgm.service: inactive, not enabled (wanted enabled and running)')
    managed = plan(with_diag(CONVERGED, STOPPED_ENGINE), settings())
    assert agreement.verdicts(managed, p.CHECKS)[p.CHECK][1].startswith(
        'the dcgm role manages DCGM on this node, yet the DCGM host engine is not running')
    assert managed['checks'][p.CHECK]['expected'] == (
        'datacenter-gpu-manager-4-core installed, nvidia-dcgm enabled and running (nodeprep_dcgm_install); dcgmi diag '
        '-r 1: every test passes (or is skipped) on every GPU, DCGM\'s test summaries pass, not every test skipped, and '
        'DCGM sees every GPU nvidia-smi lists')
