# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The readiness checks of the nvidia_driver role are its plan (issue #22): over the role's decision table, a check
passes (or does not apply) exactly when the plan has no drift for it, and a drift a run fixes is a reason to run.

The facts are test__plan_nvidia_driver's EL9 H100 node (converged or fresh) with one change per case; the odd
states are those where the readiness copies of the rules disagreed with the role: proprietary modules loaded on a
Blackwell node, the persistence daemon disabled while the settings manage it, a fabric manager on a node without
NVSwitch, the open-only GPU list in another letter case.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nvidia_driver as D
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as r
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_nvidia_driver as T

HEALTH = dict((entry[0], entry[2]) for entry in r.CHECKS)
P = D.PREFIX
V = T.VERSION


def verdicts(state, plan):
    """check id -> (status, observed) as readiness_info reports them from this plan and these facts."""
    out = {}
    for check in D.CHECKS:
        result = r.plan_check(check, plan)
        if HEALTH[check] is not None:
            result = r.with_health(result, HEALTH[check](state, {}))
        out[check] = (result['status'], result['observed'])
    return out


def _units(**changes):
    units = dict(T.CONVERGED_UNITS)
    units.update(changes)
    return T._unit_keys(units)


def blackwell(flavour='open', arch='Blackwell', device='0x2901'):
    """The converged node with one B200 (device ID 0x2901) on an NVLink 5 fabric instead of the H100."""
    state = T.facts('converged', nvidia_module=dict(T.LOADED, flavour=flavour))
    state['nvidia']['gpus'] = [{'index': 0, 'architecture': arch, 'pci_device_id': device + '10DE',
                                'pci_bus_id': '00000000:1B:00.0'}]
    state['kernel_state']['pci']['gpus'] = [{'bus_id': '0000:1b:00.0', 'device_id': device}]
    return state


def no_nvswitch(fm_installed=True, fm_unit=None):
    state = T.facts('converged', nodeprep_units=_units(**{
        'nvidia-fabricmanager.service': T.RUNNING if fm_unit is None else fm_unit}))
    pci = state['kernel_state']['pci']
    pci.update(nvswitches=[], nvswitch_count=0, nvswitch_fabric='none')
    if not fm_installed:
        packages = state['kernel_state']['driver_node']['packages']
        for name in ('nvidia-fabricmanager', 'libnvidia-nscq'):
            del packages[name]
        state['kernel_state']['driver_node']['versionlock'] = [
            e for e in state['kernel_state']['driver_node']['versionlock'] if 'fabric' not in e and 'nscq' not in e]
    return state


ALL_PASS = {
    'driver.nouveau_blacklisted': ('pass', 'blacklisted in blacklist file, not loaded'),
    'driver.loaded': ('pass', 'driver {0} loaded (open modules)'.format(V)),
    'driver.open_modules': ('pass', 'open modules loaded'),
    'driver.persistenced': ('pass', 'nvidia-persistenced: active, enabled'),
    'fabric.manager': ('pass', '1 NVSwitches on the PCI bus; nvidia-fabricmanager: active, enabled'),
}


def without_packages(*names):
    """The converged node without some of its packages (their locks stay)."""
    node = T.converged_node()
    for name in names:
        del node['packages'][name]
    return T.facts('converged', driver_node=node)


def repository_changed():
    node = T.converged_node()
    node['repos']['cuda-rhel9']['baseurl'] = 'http://mirror/cuda/'
    return T.facts('converged', driver_node=node)


def case(name, state, given):
    """One row of the decision table: facts and settings (EXPECTED holds what readiness and the plan say)."""
    return (name, state, given)


STOPPED = dict(T.RUNNING, active='inactive', sub='dead')
DISABLED = dict(STOPPED, enabled='disabled')

CASES = [
    case('converged node', T.facts('converged'), {}),
    case('fresh node', T.facts('fresh'), {}),
    case('a stopped fabric manager', T.facts('converged', nodeprep_units=_units(**{
        'nvidia-fabricmanager.service': dict(T.RUNNING, active='failed', sub='failed')})), {}),
    case('a conflicting unit, conflicts disabled',
         T.facts('converged', nodeprep_units=_units(**{'nvidia-pm.service': T.RUNNING})), {}),
    case('a conflicting unit, ignored', T.facts('converged', nodeprep_units=_units(**{'nvidia-pm.service': T.RUNNING})),
         {P + 'persistence_conflicts': 'ignore'}),
    case('nouveau not blacklisted', T.facts('converged', nouveau={'loaded': False, 'blacklisted': False}), {}),
    case('nouveau not blacklisted, the blacklist off as text',
         T.facts('converged', nouveau={'loaded': False, 'blacklisted': False}), {P + 'blacklist_nouveau': 'false'}),
    case('nouveau blacklisted but loaded', T.facts('converged', nouveau={'loaded': True, 'blacklisted': True}), {}),
    case('another branch wanted', T.facts('converged'), {P + 'branch': '590'}),
    case('kernel module and user space differ',
         T.facts('converged', nvidia_module=dict(T.LOADED, version='580.82.07')), {}),
    case('a newer driver installed than loaded', T.facts('converged', dkms=[
        {'module': 'nvidia-open', 'version': '580.105.08', 'kernel': T.K9, 'status': 'installed'}]), {}),
    case('the driver not loaded', T.facts('converged', nvidia_module=dict(T.NOT_LOADED)), {}),
    case('a new kernel boots next, the driver not built for it',
         T.facts('converged', default=T.K9_NEXT, devel={T.K9: True, T.K9_NEXT: True}), {}),
    case('proprietary modules loaded on a Blackwell node', blackwell('proprietary'), {}),
    case('proprietary modules asked for on a Blackwell node', blackwell('proprietary'),
         {P + 'module_type': 'proprietary'}),
    case('open modules on a Blackwell node, nvidia-smi in upper case', blackwell(arch='BLACKWELL', device='0x1234'),
         {}),
    case('an extra open-only device ID in upper case, proprietary loaded',
         blackwell('proprietary', arch='Hopper', device='0x2330'), {P + 'open_required_device_ids': ['0X2330']}),
    case('proprietary modules on Hopper with open wanted', T.facts('converged', nvidia_module=dict(
        T.LOADED, flavour='proprietary')), {}),
    case('persistenced disabled while the settings manage it', T.facts('converged', nodeprep_units=_units(**{
        'nvidia-persistenced.service': DISABLED})), {}),
    case('persistenced running, not enabled', T.facts('converged', nodeprep_units=_units(**{
        'nvidia-persistenced.service': dict(T.RUNNING, enabled='disabled')})), {}),
    case('persistenced stopped, legacy persistence mode on every GPU', dict(
        T.facts('converged', nodeprep_units=_units(**{'nvidia-persistenced.service': DISABLED})),
        nvidia=dict(T.SMI, gpus=[dict(T.SMI['gpus'][0], persistence_mode=True)])), {}),
    case('persistenced not managed', T.facts('converged', nodeprep_units=_units(**{
        'nvidia-persistenced.service': DISABLED})), {P + 'persistenced': 'false'}),
    case('a fabric manager on a node without NVSwitch', no_nvswitch(), {}),
    case('no NVSwitch, no fabric manager', no_nvswitch(fm_installed=False, fm_unit=T.ABSENT), {}),
    case('a fabric manager always wanted on a node without NVSwitch, not running',
         no_nvswitch(fm_unit=dict(T.RUNNING, active='failed', sub='failed')), {P + 'fabricmanager': 'always'}),
    case('a fabric manager never wanted', T.facts('converged'), {P + 'fabricmanager': 'never'}),
    # Work that no check reflected before issue 27: each is now drift of the check it belongs to, or no work.
    case('the switch library missing', without_packages('libnvidia-nscq'), {}),
    case('the driver packages not locked', T.facts('converged', driver_node=dict(
        T.converged_node(), versionlock=[])), {}),
    case('the repository changed on a converged node: no work', repository_changed(), {}),
    case('nodeprep_gpu_node true, no GPU on the PCI bus yet', T.facts('fresh', pci=dict(
        T.H100_PCI, gpus=[], gpu_count=0)), {'nodeprep_gpu_node': 'true'}),
]


# What readiness reports where it differs from the converged node (ALL_PASS), and the plan's reasons (the whole
# list), for each row of CASES.
EXPECTED = {
    'converged node': (
        {},
        []),
    'fresh node': (
        {
            'driver.loaded': (
                'fail', 'the nvidia kernel module is not loaded; nvidia-smi failed: nvidia-smi not found'),
            'driver.nouveau_blacklisted': (
                'fail', 'nouveau is not blacklisted'),
            'driver.open_modules': (
                'skip', 'no nvidia kernel module loaded'),
            'driver.persistenced': (
                'fail', 'nvidia-persistenced: not installed'),
            'fabric.manager': (
                'fail', '1 NVSwitches on the PCI bus; nvidia-fabricmanager: not installed'),
        },
        T.FRESH_REASONS),
    'a stopped fabric manager': (
        {
            'fabric.manager': (
                'fail', '1 NVSwitches on the PCI bus; nvidia-fabricmanager: failed, enabled'),
        },
        [
            'nvidia-fabricmanager: not enabled and running',
        ]),
    'a conflicting unit, conflicts disabled': (
        {
            'driver.persistenced': (
                'fail', 'nvidia-pm.service also set persistence mode and conflict with nvidia-persistenced '
                '(nodeprep_nvidia_driver_persistence_conflicts=disable)'),
        },
        [
            'persistence conflicts: nvidia-pm.service',
        ]),
    'a conflicting unit, ignored': (
        {},
        []),
    'nouveau not blacklisted': (
        {
            'driver.nouveau_blacklisted': (
                'fail', 'nouveau is not blacklisted'),
        },
        [
            'nouveau: not blacklisted',
        ]),
    'nouveau not blacklisted, the blacklist off as text': (
        {
            'driver.nouveau_blacklisted': (
                'skip', 'not checked'),
        },
        []),
    'nouveau blacklisted but loaded': (
        {
            'driver.nouveau_blacklisted': (
                'fail', 'nouveau is loaded (reboot after blacklisting)'),
        },
        [
            'reboot: nvidia_driver: nouveau is loaded (it is blacklisted and leaves at the next boot)',
        ]),
    'another branch wanted': (
        {
            'driver.loaded': (
                'fail', 'driver 580.95.05 is loaded, branch 590 wanted'),
        },
        [
            'driver: not the wanted driver, or not loaded',
            'module stream: 590-open',
            'extras: version unknown',
            'versionlock: plugin or entries missing, or stale entries',
        ]),
    'kernel module and user space differ': (
        {
            'driver.loaded': (
                'fail', 'kernel module 580.82.07 differs from user-space driver 580.95.05 (reboot or reload)'),
        },
        [
            'driver: not the wanted driver, or not loaded',
            'reboot: nvidia_driver: the loaded NVIDIA module is 580.82.07, the installed driver is 580.95.05',
        ]),
    'a newer driver installed than loaded': (
        {
            'driver.loaded': (
                'fail', 'driver 580.105.08 is installed (dkms), the loaded module is 580.95.05 (reboot to load it)'),
        },
        [
            'reboot: nvidia_driver: the loaded NVIDIA module is 580.95.05, the installed driver is 580.105.08',
            'extras: nvidia-fabricmanager-580.105.08, libnvidia-nscq-580.105.08',
            'versionlock: plugin or entries missing, or stale entries',
        ]),
    'the driver not loaded': (
        {
            'driver.loaded': (
                'fail', 'the nvidia kernel module is not loaded'),
            'driver.open_modules': (
                'skip', 'no nvidia kernel module loaded'),
        },
        [
            'driver: not the wanted driver, or not loaded',
        ]),
    'a new kernel boots next, the driver not built for it': (
        {
            'driver.loaded': (
                'warn', 'driver 580.95.05 is not built for the kernel that boots next, 5.14.0-611.el9.x86_64 (a reboot '
                'would bring the node up without its GPUs; the role builds it)'),
        },
        [
            'driver: not the wanted driver, or not loaded',
        ]),
    'proprietary modules loaded on a Blackwell node': (
        {
            'driver.loaded': (
                'pass', 'driver 580.95.05 loaded (proprietary modules)'),
            'driver.open_modules': (
                'fail', 'proprietary modules loaded; Blackwell and newer GPUs need the open ones (nvidia-smi '
                'reports GPU 0 as Blackwell; PCI device ID 0x2901 is Blackwell or newer)'),
        },
        [
            'driver: not the wanted driver, or not loaded',
            'reboot: nvidia_driver: the loaded NVIDIA modules are proprietary, open were asked for',
        ]),
    'proprietary modules asked for on a Blackwell node': (
        {
            'driver.loaded': (
                'fail', 'the settings of role nvidia_driver are invalid: '
                'nodeprep_nvidia_driver_module_type=proprietary is not supported on this node: nvidia-smi '
                'reports GPU 0 as Blackwell; PCI device ID 0x2901 is Blackwell or newer. Blackwell and '
                "newer GPUs run only with NVIDIA's open kernel modules; allowed here: open."),
            'driver.nouveau_blacklisted': (
                'fail', 'the settings of role nvidia_driver are invalid: '
                'nodeprep_nvidia_driver_module_type=proprietary is not supported on this node: nvidia-smi '
                'reports GPU 0 as Blackwell; PCI device ID 0x2901 is Blackwell or newer. Blackwell and '
                "newer GPUs run only with NVIDIA's open kernel modules; allowed here: open."),
            'driver.open_modules': (
                'fail', 'the settings of role nvidia_driver are invalid: '
                'nodeprep_nvidia_driver_module_type=proprietary is not supported on this node: nvidia-smi '
                'reports GPU 0 as Blackwell; PCI device ID 0x2901 is Blackwell or newer. Blackwell and '
                "newer GPUs run only with NVIDIA's open kernel modules; allowed here: open."),
            'driver.persistenced': (
                'fail', 'the settings of role nvidia_driver are invalid: '
                'nodeprep_nvidia_driver_module_type=proprietary is not supported on this node: nvidia-smi '
                'reports GPU 0 as Blackwell; PCI device ID 0x2901 is Blackwell or newer. Blackwell and '
                "newer GPUs run only with NVIDIA's open kernel modules; allowed here: open."),
            'fabric.manager': (
                'fail', 'the settings of role nvidia_driver are invalid: '
                'nodeprep_nvidia_driver_module_type=proprietary is not supported on this node: nvidia-smi '
                'reports GPU 0 as Blackwell; PCI device ID 0x2901 is Blackwell or newer. Blackwell and '
                "newer GPUs run only with NVIDIA's open kernel modules; allowed here: open."),
        },
        [
            'refused: nodeprep_nvidia_driver_module_type=proprietary is not supported on this node: '
            'nvidia-smi reports GPU 0 as Blackwell; PCI device ID 0x2901 is Blackwell or newer. Blackwell and '
            "newer GPUs run only with NVIDIA's open kernel modules; allowed here: open.",
        ]),
    'open modules on a Blackwell node, nvidia-smi in upper case': (
        {},
        []),
    'an extra open-only device ID in upper case, proprietary loaded': (
        {
            'driver.loaded': (
                'pass', 'driver 580.95.05 loaded (proprietary modules)'),
            'driver.open_modules': (
                'fail', 'proprietary modules loaded; Blackwell and newer GPUs need the open ones (PCI device ID '
                '0x2330 is Blackwell or newer)'),
        },
        [
            'driver: not the wanted driver, or not loaded',
            'reboot: nvidia_driver: the loaded NVIDIA modules are proprietary, open were asked for',
        ]),
    'proprietary modules on Hopper with open wanted': (
        {
            'driver.loaded': (
                'pass', 'driver 580.95.05 loaded (proprietary modules)'),
            'driver.open_modules': (
                'warn', 'proprietary modules loaded, nodeprep_nvidia_driver_module_type=open (the role reboots into '
                'them)'),
        },
        [
            'driver: not the wanted driver, or not loaded',
            'reboot: nvidia_driver: the loaded NVIDIA modules are proprietary, open were asked for',
        ]),
    'persistenced disabled while the settings manage it': (
        {
            'driver.persistenced': (
                'fail', 'nvidia-persistenced: inactive, disabled; persistence mode off on GPU 0'),
        },
        [
            'nvidia-persistenced: not enabled and running',
        ]),
    'persistenced running, not enabled': (
        {
            'driver.persistenced': (
                'fail', 'nvidia-persistenced: active, disabled (not started at boot)'),
        },
        [
            'nvidia-persistenced: not enabled and running',
        ]),
    'persistenced stopped, legacy persistence mode on every GPU': (
        {
            'driver.persistenced': (
                'warn', 'nvidia-persistenced: inactive, disabled; persistence mode set by the legacy nvidia-smi -pm '
                '1 on all GPUs'),
        },
        [
            'nvidia-persistenced: not enabled and running',
        ]),
    'persistenced not managed': (
        {
            'driver.persistenced': (
                'skip', 'not checked'),
        },
        []),
    'a fabric manager on a node without NVSwitch': (
        {
            'fabric.manager': (
                'warn', 'no NVSwitch on the PCI bus and no NVLink 5 switch bridge; libnvidia-nscq, '
                'nvidia-fabricmanager installed, not wanted (nodeprep_nvidia_driver_fabricmanager=auto): '
                'the role removes them'),
        },
        [
            'extras: libnvidia-nscq, nvidia-fabricmanager',
            'versionlock: plugin or entries missing, or stale entries',
        ]),
    'no NVSwitch, no fabric manager': (
        {
            'fabric.manager': (
                'skip', 'no NVSwitch on the PCI bus and no NVLink 5 switch bridge'),
        },
        []),
    'a fabric manager always wanted on a node without NVSwitch, not running': (
        {
            'fabric.manager': (
                'fail', 'no NVSwitch on the PCI bus and no NVLink 5 switch bridge; nvidia-fabricmanager: failed, '
                'enabled'),
        },
        [
            'nvidia-fabricmanager: not enabled and running',
        ]),
    'a fabric manager never wanted': (
        {
            'fabric.manager': (
                'warn', '1 NVSwitches on the PCI bus; libnvidia-nscq, nvidia-fabricmanager installed, not wanted '
                '(nodeprep_nvidia_driver_fabricmanager=never): the role removes them'),
        },
        [
            'extras: libnvidia-nscq, nvidia-fabricmanager',
            'versionlock: plugin or entries missing, or stale entries',
        ]),
    'the switch library missing': (
        {
            'driver.loaded': (
                'warn', 'driver 580.95.05 loaded (open modules); versionlock: plugin or entries missing, or stale '
                'entries'),
            'fabric.manager': (
                'fail', '1 NVSwitches on the PCI bus; nvidia-fabricmanager: active, enabled; extras: '
                'libnvidia-nscq-580.95.05'),
        },
        [
            'extras: libnvidia-nscq-580.95.05',
            'versionlock: plugin or entries missing, or stale entries',
        ]),
    'the driver packages not locked': (
        {
            'driver.loaded': (
                'warn', 'driver 580.95.05 loaded (open modules); versionlock: plugin or entries missing, or stale '
                'entries'),
        },
        [
            'versionlock: plugin or entries missing, or stale entries',
        ]),
    'the repository changed on a converged node: no work': (
        {},
        []),
    # Skipped before asking the plan until issue 27 (no NVIDIA GPU on the PCI bus): the role's work fails them now.
    'nodeprep_gpu_node true, no GPU on the PCI bus yet': (
        {
            'driver.nouveau_blacklisted': ('fail', 'nouveau is not blacklisted'),
            'driver.loaded': ('fail', 'driver: not the wanted driver, or not loaded'),
            'driver.open_modules': ('skip', 'no nvidia kernel module loaded'),
            'driver.persistenced': ('fail', 'nvidia-persistenced: not enabled and running'),
            'fabric.manager': ('fail', '1 NVSwitches on the PCI bus; nvidia-fabricmanager: not installed'),
        },
        list(T.FRESH_REASONS)),
}


@pytest.mark.parametrize('name, state, given', CASES, ids=[c[0] for c in CASES])
def test_decision_table(name, state, given):
    """What readiness reports and why the role runs, row by row (messages name the GPU, module, unit and value)."""
    plan = T.make_plan(state, given)
    changed, reasons = EXPECTED[name]
    wanted = dict(ALL_PASS)
    wanted.update(changed)
    assert verdicts(state, plan) == wanted, name
    assert plan['reasons'] == reasons, name


@pytest.mark.parametrize('name, state, given', CASES, ids=[c[0] for c in CASES])
def test_a_check_passes_exactly_when_the_plan_has_no_drift_for_it(name, state, given):
    plan = T.make_plan(state, given)
    for check, (status, _observed) in verdicts(state, plan).items():
        drift = _plan.drift_for(plan, check)
        if plan['problems']:
            assert status == 'fail', (name, check)
        elif check == 'driver.loaded' and not (state.get('nvidia') or {}).get('present'):
            # nvidia-smi did not answer: what readiness observes itself fails the check, drift or none.
            assert status == 'fail', (name, check)
        else:
            assert (drift == []) == (status in ('pass', 'skip')), (name, check, drift, status)
        # A drift a run of the role fixes is a reason for the role to run.
        if [item for item in plan['drift'] if item['check'] == check and item['fixable']]:
            assert plan['reasons'], (name, check)


@pytest.mark.parametrize('name, state, given', CASES, ids=[c[0] for c in CASES])
def test_every_piece_of_work_is_drift_of_a_check(name, state, given):
    """The agreement table of the plan (issue 27): the plan refuses exactly when every check fails; otherwise each
    piece of the role's work (work_items) is drift of the check it names, so a check passes (or does not apply) only
    where the role has nothing to do for it, and the role has work exactly when there is fixable drift."""
    plan = T.make_plan(state, given)
    statuses = dict((check, status) for check, (status, _o) in verdicts(state, plan).items())
    if plan['problems'] or plan['errors']:
        assert set(statuses.values()) == {'fail'}, name
        return
    items = _driver.work_items(T.driver_of(state, given), D.driver_facts(state), D.work_settings(plan['settings']),
                               state.get('nodeprep_units'), state.get('nodeprep_files'))
    assert [msg for _c, _l, msg in items] == plan['reasons'], name
    for check, level, msg in items:
        assert _plan.drift_for(plan, check), (name, check, msg)
        # The check's own words set its level (a legacy persistence mode warns); the work's level where they are
        # the work's words.
        assert statuses[check] in ('fail', 'warn'), (name, check, msg)
        if _plan.drift_for(plan, check) == [msg]:
            assert statuses[check] == level, (name, check, msg)
    assert bool(plan['reasons']) == bool(_plan.fixable_drift(plan)), name


def test_nvidia_smi_that_does_not_answer_fails_driver_loaded_without_plan_drift():
    """Driver health as observed stays in readiness: the module is loaded, nvidia-smi hangs."""
    state = T.facts('converged', nvidia={'present': True, 'error': 'nvidia-smi timed out after 60 s',
                                         'driver_version': None, 'gpus': []})
    plan = T.make_plan(state)
    assert _plan.drift_for(plan, 'driver.loaded') == []
    assert verdicts(state, plan)['driver.loaded'] == ('fail', 'nvidia-smi failed: nvidia-smi timed out after 60 s')


def test_a_gpu_fabric_not_trained_fails_gpu_fabric_not_fabric_manager():
    # One rule, one home: the unit is fabric.manager's (the plan), the GPUs' fabric state gpu.fabric's.
    state = T.facts('converged')
    state['nvidia']['gpus'][0].update(pci_bus_id='00000000:1B:00.0', fabric={'state': 'In Progress', 'status': None})
    plan = T.make_plan(state)
    assert _plan.drift_for(plan, 'fabric.manager') == []
    assert verdicts(state, plan)['fabric.manager'] == (
        'pass', '1 NVSwitches on the PCI bus; nvidia-fabricmanager: active, enabled')
    fabric = r._check('gpu.fabric', *r._fabric_check(state, {}))
    assert (fabric['id'], fabric['status']) == ('gpu.fabric', 'fail')
    assert fabric['observed'].startswith('GPU 0 (00000000:1B:00.0): fabric state In Progress')


def test_kernel_facts_that_could_not_be_read_fail_every_driver_check():
    state = T.facts('converged', nodeprep_errors={'kernel': 'dkms status timed out'})
    plan = T.make_plan(state)
    assert dict((check, status) for check, (status, _o) in verdicts(state, plan).items()) == dict(
        (check, 'fail') for check in D.CHECKS)
    assert _plan.drift_for(plan, 'driver.persistenced') == ['the kernel facts could not be read: dkms status timed out']
