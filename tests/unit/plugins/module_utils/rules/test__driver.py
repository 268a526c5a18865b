# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decision tables of the nvidia_driver role (plugins/module_utils/rules/_driver.py).

Each row is a node state (facts + what the module read on the node) and the settings; the assertions name what the
plan must decide.  Rows cover R1 (names by branch), R3 (no nvlsm unit), R4 (EPEL/CRB), R5/R6 (keys), R7 (Ubuntu
persistence drop-in), R8 (Debian DKMS names), R9 (exact versionlock), R12 (compute-only set), R13 (Secure Boot),
check mode on a fresh node, and branch moves 580 -> 590 -> 580 and 580 -> 570.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver as P
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _driver_packages
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _nvswitch_fabric

EL9 = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
       'distribution_major_version': '9', 'architecture': 'x86_64'}
EL8 = dict(EL9, distribution_version='8.10', distribution_major_version='8')
EL10 = dict(EL9, distribution_version='10.0', distribution_major_version='10')
UBUNTU = {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_version': '24.04',
          'distribution_major_version': '24', 'architecture': 'x86_64'}
DEBIAN = {'os_family': 'Debian', 'distribution': 'Debian', 'distribution_version': '12',
          'distribution_major_version': '12', 'architecture': 'x86_64'}
K9 = '5.14.0-570.el9.x86_64'

SETTINGS = {'method': 'repo', 'branch': '580', 'version': '', 'module_type': 'open', 'package_set': 'full',
            'fabricmanager': 'auto', 'nvlsm': 'auto', 'nscq': True, 'imex': False, 'persistenced': True,
            'persistence_conflicting_units': ['nvidia-pm.service'], 'repo_url': '', 'repo_gpgcheck': True,
            'repo_gpgkey': '', 'epel': 'auto', 'epel_url': '', 'epel_gpgkey': '', 'open_required_device_ids': [],
            'reboot_ok': True}

H100_PCI = {'gpus': [{'bus_id': '0000:1b:00.0', 'device_id': '0x2330'}], 'gpu_count': 1,
            'nvswitches': [{'bus_id': '0000:05:00.0', 'device_id': '0x22a3'}], 'nvswitch_count': 1,
            'nvlink5_bridges': [], 'nvlink5_bridge_count': 0, 'nvswitch_fabric': 'pci'}
B200_PCI = {'gpus': [{'bus_id': '0000:1b:00.0', 'device_id': '0x2901'}], 'gpu_count': 1, 'nvswitches': [],
            'nvswitch_count': 0, 'nvlink5_bridges': [{'ib_device': 'mlx5_0', 'bus_id': '0000:40:00.0',
                                                      'device_id': '0x1021'}],
            'nvlink5_bridge_count': 1, 'nvswitch_fabric': 'nvlink5'}
FRESH_NVIDIA = {'present': False, 'error': 'nvidia-smi not found', 'driver_version': None, 'gpus': []}


def kernel(pci, loaded=None, dkms=None, nouveau=False, running=K9, default=None, secure=None):
    return {'running': running, 'default': default or running, 'pci': pci,
            'nouveau': {'loaded': nouveau, 'blacklisted': True},
            'nvidia_module': loaded or {'loaded': False, 'version': None, 'flavour': None},
            'dkms': dkms or [], 'secure_boot': secure or {'enabled': False, 'source': 'x', 'dkms_mok': {}}}


def smi(version, arch='Hopper'):
    return {'present': True, 'error': None, 'driver_version': version,
            'gpus': [{'index': 0, 'architecture': arch, 'pci_device_id': '0x233010DE'}]}


def rpm(name, version, epoch=3, release='1.el9'):
    return {name: [{'epoch': epoch, 'version': version, 'release': release, 'arch': 'x86_64'}]}


def el_node_with(version, fm_name='nvidia-fabricmanager', nscq='libnvidia-nscq', locks=None, release='1.el9'):
    packages = {}
    for name in ('nvidia-open', 'kmod-nvidia-open-dkms', 'nvidia-driver', 'nvidia-persistenced', fm_name, nscq):
        packages.update(rpm(name, version, release=release))
    packages.update(rpm('dkms', '3.2.1', epoch=0, release='1.el9'))
    packages.update(rpm('nvlsm', '2025.06.7', epoch=0))
    return {'repos': {'cuda-rhel9': {'baseurl': P.CUDA_BASE + 'rhel9/x86_64/', 'enabled': True, 'gpgcheck': True,
                                     'gpgkey': P.CUDA_BASE + 'rhel9/x86_64/D42D0685.pub', 'file': 'x'},
                      'nodeprep-epel': {'baseurl': P.EPEL_URL.format(major=9, arch='x86_64'), 'enabled': True,
                                        'gpgcheck': True, 'gpgkey': P.EPEL_KEY.format(major=9), 'file': 'y'},
                      'crb': {'enabled': True, 'file': '/etc/yum.repos.d/rocky.repo'}},
            'packages': packages,
            'versionlock': locks if locks is not None else [
                '{0}-3:{1}-{2}.*'.format(n, version, release) for n in sorted(packages)
                if _driver_packages.NVIDIA_STACK_RE.match(n)],
            'versionlock_plugin': True, 'module_stream': version.split('.')[0] + '-open'}


def running_on(version, pci=None, os_facts=None):
    return {'os': os_facts or EL9, 'services': {
        'nvidia-persistenced.service': {'status': 'enabled', 'state': 'running'},
        'nvidia-fabricmanager.service': {'status': 'enabled', 'state': 'running'}},
        'kernel_state': kernel(pci or H100_PCI, loaded={'loaded': True, 'version': version, 'flavour': 'open'},
                               dkms=[{'module': 'nvidia-open', 'version': version, 'kernel': K9,
                                      'status': 'installed'}]),
        'nvidia': smi(version)}


def settings(**kw):
    out = dict(SETTINGS)
    out.update(kw)
    return out


# ------------------------------------------------------------------------------------------------ names (R1, R5, R6)

@pytest.mark.parametrize('family, branch, fm, nscq', [
    ('el', '570', 'nvidia-fabric-manager', 'libnvidia-nscq-570'),
    ('el', '580', 'nvidia-fabricmanager', 'libnvidia-nscq'),
    ('el', '590', 'nvidia-fabricmanager', 'libnvidia-nscq'),
    ('debian', '570', 'nvidia-fabricmanager-570', 'libnvidia-nscq-570'),
    ('debian', '580', 'nvidia-fabricmanager', 'libnvidia-nscq'),
    ('debian', '595', 'nvidia-fabricmanager', 'libnvidia-nscq'),
])
def test_fabricmanager_and_nscq_names(family, branch, fm, nscq):
    assert P.fabricmanager_package(family, branch) == fm
    assert P.nscq_package(family, branch) == nscq


@pytest.mark.parametrize('os_facts, key', [(EL8, 'D42D0685.pub'), (EL9, 'D42D0685.pub'), (EL10, 'CDF6BA43.pub'),
                                           (UBUNTU, '3bf863cc.pub'), (DEBIAN, '3bf863cc.pub')])
def test_cuda_key_per_os(os_facts, key):
    facts = {'os': os_facts, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA}
    plan = P.driver_plan(facts, settings())
    assert plan['repo']['key_file'] == key
    assert plan['repo']['gpgkey'] == plan['repo']['url'] + key
    assert plan['repo']['gpgcheck'] is True


def test_elrepo_keys():
    assert P.elrepo_keys('8') == [P.ELREPO_KEY_V1, P.ELREPO_KEY_V2]
    assert P.elrepo_keys('9') == [P.ELREPO_KEY_V1, P.ELREPO_KEY_V2]
    assert P.elrepo_keys('10') == [P.ELREPO_KEY_V2]


# ------------------------------------------------------------------------------------------------ fresh nodes

def test_fresh_el9_h100_check_mode_predicts_everything():
    facts = {'os': EL9, 'kernel_state': kernel(H100_PCI, nouveau=True), 'nvidia': FRESH_NVIDIA, 'services': {}}
    node = {'repos': {'crb': {'enabled': False, 'file': '/etc/yum.repos.d/rocky.repo'}}, 'packages': {}}
    plan = P.driver_plan(facts, settings(), node=node, check_mode=True)
    assert plan['ok'] is False
    assert plan['install']['packages'] == ['nvidia-open']
    assert plan['stream'] == {'use': True, 'wanted': '580-open', 'current': '', 'reset': False, 'enable': True}
    assert plan['epel']['needed'] and plan['epel']['define'] and plan['epel']['changes']
    assert plan['epel']['crb'] == {'id': 'crb', 'file': '/etc/yum.repos.d/rocky.repo', 'enable': True,
                                   'defined': True}
    assert plan['fabric']['kind'] == 'pci' and plan['fabric']['nvlsm'] is False
    assert plan['services'] == ['nvidia-fabricmanager']
    # Not known before the driver is installed: the fabric manager version.
    assert plan['extras']['packages'] == ['nvidia-persistenced', 'nvidia-fabricmanager', 'libnvidia-nscq']
    assert plan['predict'] == {'packages': True, 'extras': True, 'versionlock': True,
                               'units': ['nvidia-persistenced', 'nvidia-fabricmanager']}
    assert plan['reboot']['why'] == ['nvidia_driver: nouveau is loaded (it is blacklisted and leaves at the next '
                                     'boot)']


def test_fresh_el8_enables_powertools():
    facts = {'os': EL8, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA}
    node = {'repos': {'powertools': {'enabled': False, 'file': '/etc/yum.repos.d/Rocky-PowerTools.repo'}}}
    plan = P.driver_plan(facts, settings(), node=node)
    assert plan['epel']['crb']['id'] == 'powertools' and plan['epel']['crb']['enable'] is True


def test_epel_release_already_there_is_used():
    facts = {'os': EL9, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA}
    node = {'repos': {'epel': {'enabled': True, 'file': '/etc/yum.repos.d/epel.repo'}}}
    plan = P.driver_plan(facts, settings(), node=node)
    assert plan['epel']['needed'] is True and plan['epel']['define'] is False
    assert plan['epel']['provided_by'] == 'epel'
    assert 'crb repository, which is not defined' in plan['warnings'][0]


def test_fresh_el10_b200_nvlink5():
    facts = {'os': EL10, 'kernel_state': kernel(B200_PCI, running='6.12.0-55.el10.x86_64'), 'nvidia': FRESH_NVIDIA,
             'services': {}}
    plan = P.driver_plan(facts, settings(), node={}, check_mode=True)
    assert plan['open_required_reasons'] == ['PCI device ID 0x2901 is Blackwell or newer']
    assert plan['repo']['gpgkey'].endswith('/rhel10/x86_64/CDF6BA43.pub')
    assert plan['install']['packages'] == ['nvidia-open-580.*']
    assert plan['stream']['use'] is False
    # R22: NVSDM instead of nscq, infiniband-diags with nvlsm.
    assert plan['fabric'] == {'kind': 'nvlink5', 'fabricmanager': True, 'nvlsm': True, 'nscq': False, 'nvsdm': True,
                              'nvlink5_packages': ['infiniband-diags'], 'ib_umad': True,
                              'bridges': ['mlx5_0'], 'ib_umad_conf': '/etc/modules-load.d/nodeprep-nvlsm.conf',
                              'ib_umad_conf_content': P.IB_UMAD_CONF_TEXT}
    # R3: the fabric manager starts NVLSM; no nvlsm unit is enabled or expected.
    assert plan['services'] == ['nvidia-fabricmanager']
    assert 'nvlsm.service' not in plan['units_missing']
    assert 'nvlsm' in plan['extras']['packages']


def test_hopper_without_switches_has_no_fabric_manager():
    pci = dict(H100_PCI, nvswitches=[], nvswitch_count=0, nvswitch_fabric='none')
    plan = P.driver_plan({'os': EL9, 'kernel_state': kernel(pci), 'nvidia': FRESH_NVIDIA}, settings())
    assert plan['fabric']['fabricmanager'] is False and plan['services'] == []
    assert plan['extras']['packages'] == ['nvidia-persistenced']


def test_old_facts_without_fabric_key_fall_back_to_pci_count():
    pci = {'gpus': [], 'gpu_count': 0, 'nvswitches': [{}], 'nvswitch_count': 1}
    assert _nvswitch_fabric.nvswitch_fabric({'pci': pci}) == 'pci'


# ------------------------------------------------------------------------------------------------ package sets (R12)

@pytest.mark.parametrize('os_facts, package_set, module_type, version, expected', [
    (EL9, 'full', 'open', '', ['nvidia-open']),
    (EL9, 'compute', 'open', '', ['nvidia-driver-cuda', 'kmod-nvidia-open-dkms']),
    (EL9, 'compute', 'proprietary', '', ['nvidia-driver-cuda', 'kmod-nvidia-latest-dkms']),
    (EL10, 'compute', 'open', '', ['nvidia-driver-cuda-580.*', 'kmod-nvidia-open-dkms-580.*']),
    (EL10, 'full', 'open', '580.95.05', ['nvidia-open-580.95.05']),
    (EL9, 'full', 'proprietary', '', ['cuda-drivers']),
    (UBUNTU, 'full', 'open', '', ['nvidia-open']),
])
def test_package_sets(os_facts, package_set, module_type, version, expected):
    facts = {'os': os_facts, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA}
    plan = P.driver_plan(facts, settings(package_set=package_set, module_type=module_type, version=version))
    assert plan['refusals'] == []
    assert plan['install']['packages'] == expected


@pytest.mark.parametrize('os_facts, pci, kw, message', [
    (EL9, H100_PCI, {'module_type': 'proprietary', 'branch': '620'},
     'nodeprep_nvidia_driver_module_type=proprietary cannot be installed on this node with '
     'nodeprep_nvidia_driver_branch=620: NVIDIA ships only the open kernel modules from branch 620 on (driver '
     'installation guide 620, "Kernel Modules"); allowed: module_type open, or proprietary with a branch below 620 '
     '(e.g. 580, the LTS branch).'),
    (EL9, B200_PCI, {'module_type': 'proprietary'},
     "nodeprep_nvidia_driver_module_type=proprietary is not supported on this node: PCI device ID 0x2901 is Blackwell "
     "or newer. Blackwell and newer GPUs run only with NVIDIA's open kernel modules; allowed here: open."),
    (EL9, B200_PCI, {'branch': '550'},
     'nodeprep_nvidia_driver_branch=550 is too old for this node (PCI device ID 0x2901 is Blackwell or newer): '
     'Blackwell needs 570.133.20 or newer (branch 570 or later; 580 is the LTS branch).'),
    (EL9, H100_PCI, {'branch': 'R580'},
     'nodeprep_nvidia_driver_branch=R580 is not a driver branch; give its three-digit number, e.g. 580 (R580 LTS), '
     '590, 595.'),
    (EL9, H100_PCI, {'version': '570.1.2'},
     'nodeprep_nvidia_driver_version=570.1.2 is not a version of branch nodeprep_nvidia_driver_branch=580; allowed: '
     '580.<minor>[.<patch>] (e.g. 580.95.05) or empty for the newest of the branch.'),
    (EL9, H100_PCI, {'method': 'runfile'},
     'nodeprep_nvidia_driver_method=runfile needs nodeprep_nvidia_driver_version (the exact version of the .run '
     'file, e.g. 580.95.05); it is empty.'),
])
def test_refusals(os_facts, pci, kw, message):
    plan = P.driver_plan({'os': os_facts, 'kernel_state': kernel(pci), 'nvidia': FRESH_NVIDIA}, settings(**kw))
    assert plan['refusals'] == [message]
    assert 'install' not in plan


# ------------------------------------------------------------------------------------------------ converged node

def test_converged_el9_changes_nothing():
    plan = P.driver_plan(running_on('580.95.05'), settings(), node=el_node_with('580.95.05'), stage='installed',
                         run={'start_version': '580.95.05'}, check_mode=True)
    assert plan['ok'] is True
    assert plan['extras']['missing'] == [] and plan['extras']['remove'] == [] and plan['extras']['needed'] is False
    assert plan['versionlock']['add'] == [] and plan['versionlock']['remove'] == []
    assert plan['predict'] == {'packages': False, 'extras': False, 'versionlock': False, 'units': []}
    assert plan['reboot'] == {'why': [], 'needed': False, 'allowed': True}
    assert plan['stream']['enable'] is False and plan['epel']['changes'] is False


# ------------------------------------------------------------------------------------------------ versionlock (R9)

def test_versionlock_exact_and_only_installed():
    node = el_node_with('580.95.05', locks=[])
    plan = P.driver_plan(running_on('580.95.05'), settings(), node=node, stage='installed',
                         run={'start_version': '580.95.05'})
    assert plan['versionlock']['add'] == [
        'kmod-nvidia-open-dkms-3:580.95.05-1.el9.*', 'libnvidia-nscq-3:580.95.05-1.el9.*',
        'nvidia-driver-3:580.95.05-1.el9.*', 'nvidia-fabricmanager-3:580.95.05-1.el9.*',
        'nvidia-open-3:580.95.05-1.el9.*', 'nvidia-persistenced-3:580.95.05-1.el9.*']
    # No glob, no package that is not installed, nothing outside the driver's version (nvlsm, dkms).
    assert all('*nvidia*' not in e for e in plan['versionlock']['add'])
    assert not [e for e in plan['versionlock']['add'] if e.startswith(('nvlsm', 'dkms', 'nvidia-imex'))]


def test_versionlock_left_alone_when_not_moving():
    node = el_node_with('580.95.05', locks=['nvidia-open-3:580.95.05-1.el9.*', 'kernel-0:5.14.0-570.el9.*'])
    facts = running_on('580.95.05')
    facts['kernel_state']['nvidia_module'] = {'loaded': False}
    plan = P.driver_plan(facts, settings(), node=node)
    assert plan['versionlock']['remove'] == []


# ------------------------------------------------------------------------------------------------ branch moves

def _move(from_version, to_branch, fm_from='nvidia-fabricmanager', nscq_from='libnvidia-nscq'):
    start = P.driver_plan(running_on(from_version), settings(branch=to_branch),
                          node=el_node_with(from_version, fm_from, nscq_from), check_mode=False)
    return start


@pytest.mark.parametrize('from_version, to_branch, fm_from, nscq_from, packages', [
    ('580.95.05', '590', 'nvidia-fabricmanager', 'libnvidia-nscq', ['nvidia-open-590.*']),
    ('590.44.01', '580', 'nvidia-fabricmanager', 'libnvidia-nscq', ['nvidia-open-580.*']),
    ('580.95.05', '570', 'nvidia-fabricmanager', 'libnvidia-nscq', ['nvidia-open-570.*']),
])
def test_move_start(from_version, to_branch, fm_from, nscq_from, packages):
    plan = _move(from_version, to_branch, fm_from, nscq_from)
    assert plan['version_change'] is True and plan['ok'] is False
    assert plan['install']['packages'] == packages
    assert plan['stream']['reset'] is True and plan['stream']['enable'] is True
    # Every NVIDIA lock goes before the move (they would hold the old version).
    assert plan['versionlock']['remove'] == el_node_with(from_version, fm_from, nscq_from)['versionlock']
    assert plan['versionlock']['add'] == []


@pytest.mark.parametrize('from_version, to_version, fm_from, nscq_from, fm_to, nscq_to', [
    ('580.95.05', '590.44.01', 'nvidia-fabricmanager', 'libnvidia-nscq', 'nvidia-fabricmanager', 'libnvidia-nscq'),
    ('590.44.01', '580.95.05', 'nvidia-fabricmanager', 'libnvidia-nscq', 'nvidia-fabricmanager', 'libnvidia-nscq'),
    ('580.95.05', '570.195.03', 'nvidia-fabricmanager', 'libnvidia-nscq', 'nvidia-fabric-manager',
     'libnvidia-nscq-570'),
    ('570.195.03', '580.95.05', 'nvidia-fabric-manager', 'libnvidia-nscq-570', 'nvidia-fabricmanager',
     'libnvidia-nscq'),
])
def test_move_after_install(from_version, to_version, fm_from, nscq_from, fm_to, nscq_to):
    """The driver packages moved; the fabric manager and nscq are still the old ones, the old module is loaded."""
    node = el_node_with(from_version, fm_from, nscq_from, locks=[])
    for name in ('nvidia-open', 'kmod-nvidia-open-dkms', 'nvidia-driver', 'nvidia-persistenced'):
        node['packages'].update(rpm(name, to_version))
    facts = running_on(from_version)
    facts['kernel_state']['dkms'] = [{'module': 'nvidia-open', 'version': to_version, 'kernel': K9,
                                      'status': 'installed'}]
    branch = to_version.split('.')[0]
    plan = P.driver_plan(facts, settings(branch=branch), node=node, stage='installed',
                         run={'start_version': from_version, 'installing': True})
    assert plan['installed_version'] == to_version
    assert sorted(plan['extras']['remove']) == sorted([fm_from, nscq_from])
    assert plan['extras']['missing'] == ['{0}-{1}'.format(fm_to, to_version), '{0}-{1}'.format(nscq_to, to_version)]
    assert plan['reboot']['why'] == ['nvidia_driver: the loaded NVIDIA module is {0}, the installed driver is '
                                     '{1}'.format(from_version, to_version)]
    # Locks: only the new, installed packages at the new version; the fabric manager about to go is not locked.
    assert all(to_version in e for e in plan['versionlock']['add'])
    assert not [e for e in plan['versionlock']['add'] if e.startswith((fm_from + '-', nscq_from + '-'))]


def test_move_check_mode_predicts_reboot_and_extras():
    plan = P.driver_plan(running_on('580.95.05'), settings(branch='590'), node=el_node_with('580.95.05'),
                         stage='installed', run={'start_version': '580.95.05', 'installing': True}, check_mode=True)
    assert plan['reboot']['why'] == ['nvidia_driver: the loaded NVIDIA module 580.95.05 will differ from the '
                                     'driver being installed']
    assert plan['extras']['remove'] == ['libnvidia-nscq', 'nvidia-fabricmanager']
    assert plan['predict']['extras'] is True and plan['predict']['versionlock'] is True
    assert 'nvidia-fabricmanager' in plan['predict']['units']
    # The old locks were removed (on paper) when the move began: a real run finds none left to remove here.
    assert plan['versionlock']['remove'] == []


def test_node_on_570_stays_with_570_names():
    facts = running_on('570.195.03')
    node = el_node_with('570.195.03', 'nvidia-fabric-manager', 'libnvidia-nscq-570')
    plan = P.driver_plan(facts, settings(branch='570'), node=node, stage='installed',
                         run={'start_version': '570.195.03'})
    assert plan['ok'] is True
    assert plan['extras']['packages'] == ['nvidia-persistenced', 'nvidia-fabric-manager-570.195.03',
                                          'libnvidia-nscq-570-570.195.03']
    assert plan['extras']['missing'] == [] and plan['extras']['remove'] == []


# ------------------------------------------------------------------------------------------------ apt (R1, R7, R8)

def test_ubuntu_570_names_and_persistence_dropin():
    facts = {'os': UBUNTU, 'kernel_state': kernel(H100_PCI, loaded={'loaded': True, 'version': '570.195.03',
                                                                    'flavour': 'open'},
                                                  dkms=[{'module': 'nvidia', 'version': '570.195.03', 'kernel': K9,
                                                         'status': 'installed'}]),
             'nvidia': smi('570.195.03'), 'services': {}}
    plan = P.driver_plan(facts, settings(branch='570'), node={'packages': {}})
    assert plan['extras']['packages'] == ['nvidia-persistenced=570.195.03-*', 'nvidia-fabricmanager-570=570.195.03-*',
                                          'libnvidia-nscq-570=570.195.03-*']
    assert plan['extras']['hold'] == ['nvidia-fabricmanager-570', 'libnvidia-nscq-570']
    assert plan['install']['pinning_package'] == 'nvidia-driver-pinning-570'
    assert plan['persistenced']['dropin'] is True
    assert '--persistence-mode' in plan['persistenced']['dropin_content']
    assert 'StopWhenUnneeded=false' in plan['persistenced']['dropin_content']
    assert plan['versionlock']['use'] is False and plan['epel']['needed'] is False


def test_el_has_no_persistence_dropin():
    plan = P.driver_plan(running_on('580.95.05'), settings(), node=el_node_with('580.95.05'))
    assert plan['persistenced']['dropin'] is False


@pytest.mark.parametrize('module', ['nvidia-current', 'nvidia-current-open', 'nvidia', 'nvidia-open'])
def test_debian_dkms_names(module):
    facts = {'os': DEBIAN, 'kernel_state': kernel(H100_PCI, dkms=[{'module': module, 'version': '580.95.05',
                                                                   'kernel': K9, 'status': 'installed'}]),
             'nvidia': FRESH_NVIDIA}
    plan = P.driver_plan(facts, settings(), node={'packages': {}})
    assert plan['installed_version'] == '580.95.05' and plan['installed_source'] == 'dkms'


def test_apt_move_unpins_the_old_branch():
    facts = {'os': UBUNTU, 'kernel_state': kernel(H100_PCI, loaded={'loaded': True, 'version': '580.95.05',
                                                                    'flavour': 'open'},
                                                  dkms=[{'module': 'nvidia', 'version': '580.95.05', 'kernel': K9,
                                                         'status': 'installed'}]),
             'nvidia': smi('580.95.05')}
    plan = P.driver_plan(facts, settings(branch='590'), node={'packages': {}})
    assert plan['install']['unpin'] == ['nvidia-driver-pinning-580', 'nvidia-driver-pinning-580.95.05']
    assert plan['install']['packages'] == ['nvidia-open=590.*']


# ------------------------------------------------------------------------------------------------ Secure Boot (R13)

SB_ON = {'enabled': True, 'source': 'mokutil --sb-state', 'dkms_mok': {'path': '/var/lib/dkms/mok.pub',
                                                                       'enrolled': False}}


def _sb_facts(secure, nouveau=False):
    return {'os': EL9, 'kernel_state': kernel(H100_PCI, secure=secure, nouveau=nouveau,
                                              dkms=[{'module': 'nvidia-open', 'version': '580.95.05', 'kernel': K9,
                                                     'status': 'installed'}]),
            'nvidia': FRESH_NVIDIA}


def test_secure_boot_blocks_before_the_reboot():
    plan = P.driver_plan(_sb_facts(SB_ON, nouveau=True), settings(), node=el_node_with('580.95.05'),
                         stage='installed', run={'start_version': '', 'installing': True})
    assert len(plan['blockers']) == 1
    message = plan['blockers'][0]
    assert 'Secure Boot is enabled (mokutil --sb-state)' in message
    assert '/var/lib/dkms/mok.pub is not enrolled' in message
    assert 'mokutil --import /var/lib/dkms/mok.pub' in message
    assert 'the node is not rebooted' in message
    assert plan['reboot']['allowed'] is False
    assert plan['load']['modprobe'] is False


def test_secure_boot_key_rejected_is_no_reboot_reason():
    secure = {'enabled': True, 'source': 'mokutil --sb-state', 'dkms_mok': {'path': None, 'enrolled': None}}
    plan = P.driver_plan(_sb_facts(secure), settings(), node=el_node_with('580.95.05'), stage='installed',
                         run={'modprobe': {'rc': 1, 'stderr': 'modprobe: ERROR: could not insert \'nvidia\': Key was '
                                                              'rejected by service'}})
    assert plan['reboot']['why'] == []
    assert 'Key was rejected by service' in plan['blockers'][0]
    assert 'not known to be enrolled' in plan['blockers'][0]


def test_secure_boot_enrolled_key_is_fine():
    secure = copy.deepcopy(SB_ON)
    secure['dkms_mok']['enrolled'] = True
    plan = P.driver_plan(_sb_facts(secure), settings(), node=el_node_with('580.95.05'), stage='installed')
    assert plan['blockers'] == []
    assert plan['load']['modprobe'] is True


def test_secure_boot_not_judged_before_install():
    plan = P.driver_plan(_sb_facts(SB_ON), settings(), node={})
    assert plan['blockers'] == []


def test_plain_modprobe_failure_is_a_reboot_reason():
    plan = P.driver_plan(_sb_facts({'enabled': False}), settings(), node=el_node_with('580.95.05'), stage='installed',
                         run={'modprobe': {'rc': 1, 'stderr': 'modprobe: ERROR: could not insert: Device busy\n'}})
    assert plan['reboot']['why'] == ['nvidia_driver: modprobe nvidia failed: modprobe: ERROR: could not insert: '
                                     'Device busy']


# ------------------------------------------------------------------------------------------------ R24: DKMS for the boot kernel

ML9 = '6.16.7-1.el9.elrepo.x86_64'
ML9_LOG = ('DKMS (dkms-3.2.2) make.log for nvidia-open/580.95.05 for kernel {0} (x86_64)\n'
           'make[1]: *** [Makefile:89: modules] Error 2\n'.format(ML9))


def _boot_ml(dkms_kernels, logs=None):
    state = kernel(H100_PCI, loaded={'loaded': True, 'version': '580.95.05', 'flavour': 'open'}, default=ML9,
                   dkms=[{'module': 'nvidia-open', 'version': '580.95.05', 'kernel': k, 'status': 'installed'}
                         for k in dkms_kernels])
    state['dkms_logs'] = logs or {}
    return {'os': EL9, 'kernel_state': state, 'nvidia': smi('580.95.05')}


@pytest.mark.parametrize('dkms_kernels, logs, stage, check_mode, blocked, failed', [
    ([K9], {'nvidia-open/580.95.05': ML9_LOG}, 'installed', False, True, True),
    ([K9], {}, 'installed', False, True, False),
    ([K9, ML9], {}, 'installed', False, False, False),
    ([K9], {'nvidia-open/580.95.05': ML9_LOG}, 'start', False, False, False),
    ([K9], {'nvidia-open/580.95.05': ML9_LOG}, 'installed', True, False, False),
])
def test_no_reboot_into_a_kernel_the_driver_did_not_build_for(dkms_kernels, logs, stage, check_mode, blocked, failed):
    plan = P.driver_plan(_boot_ml(dkms_kernels, logs), settings(reboot_ok=True), node=el_node_with('580.95.05'),
                         stage=stage, check_mode=check_mode)
    found = [b for b in plan['blockers'] if 'the NVIDIA driver is not built for ' + ML9 in b]
    assert bool(found) is blocked
    if blocked:
        assert found[0].startswith('nvidia_driver on this node:')
        assert ('/var/lib/dkms/nvidia-open/580.95.05/build/make.log ends:' in found[0]) is failed
        assert plan['reboot']['needed'] is False and plan['reboot']['allowed'] is False


# ------------------------------------------------------------------------------------------------ node readers

def test_parse_repo_files():
    repos = _driver_packages.parse_repo_files({'/etc/yum.repos.d/rocky.repo': '[baseos]\nbaseurl=x\n[crb]\nname=CRB\nenabled=0\n',
                                               '/etc/yum.repos.d/cuda.repo': '[cuda-rhel9]\nbaseurl = u\ngpgcheck=1\ngpgkey=k\n'})
    assert repos['crb'] == {'file': '/etc/yum.repos.d/rocky.repo', 'enabled': False, 'gpgcheck': False,
                            'baseurl': None, 'gpgkey': None}
    assert repos['cuda-rhel9']['gpgcheck'] is True and repos['cuda-rhel9']['baseurl'] == 'u'


def test_parse_module_file():
    assert _driver_packages.parse_module_file('[nvidia-driver]\nname=nvidia-driver\nstream=580-open\nprofiles=\nstate=enabled\n') \
        == '580-open'
    assert _driver_packages.parse_module_file('[nvidia-driver]\nstream=\nstate=\n') == ''
    assert _driver_packages.parse_module_file(None) == ''


def test_lock_entry_roundtrip():
    entry = P.lock_entry({'name': 'nvidia-fabricmanager', 'epoch': 3, 'version': '580.95.05', 'release': '1.el9'})
    assert entry == 'nvidia-fabricmanager-3:580.95.05-1.el9.*'
    assert P.lock_entry_name(entry) == 'nvidia-fabricmanager'


# ------------------------------------------------------------------------------------------------ the no-op (issue 12)

UNITS_RIGHT = {
    'nvidia-persistenced.service': {'load': 'loaded', 'active': 'active', 'sub': 'running', 'enabled': 'enabled'},
    'nvidia-fabricmanager.service': {'load': 'loaded', 'active': 'active', 'sub': 'running', 'enabled': 'enabled'},
    'nvidia-imex.service': {'load': 'not-found', 'active': 'inactive', 'sub': 'dead', 'enabled': ''},
    'nvidia-pm.service': {'load': 'not-found', 'active': 'inactive', 'sub': 'dead', 'enabled': ''},
}
WORK_SETTINGS = {'blacklist_nouveau': True, 'persistence_conflicts': 'disable', 'expected_gpus': 1}


def _converged(units=None, **facts_kw):
    facts = running_on('580.95.05')
    facts.pop('services')
    facts['units'] = UNITS_RIGHT if units is None else units
    facts['kernel_state']['pci'] = dict(H100_PCI)
    facts.update(facts_kw)
    plan = P.driver_plan(facts, settings(), node=el_node_with('580.95.05'))
    return plan, facts


def test_services_from_units_has_the_service_facts_shape():
    services = P.services_from_units(UNITS_RIGHT)
    assert services['nvidia-persistenced.service'] == {'name': 'nvidia-persistenced.service', 'source': 'systemd',
                                                       'status': 'enabled', 'state': 'running'}
    assert services['nvidia-imex.service']['status'] == 'not-found'
    assert P.units_present(services) == sorted(['nvidia-persistenced.service', 'nvidia-fabricmanager.service'],
                                               key=list(UNITS_RIGHT).index)


def test_converged_node_has_no_work():
    plan, facts = _converged()
    assert plan['units_missing'] == [] and plan['persistence_conflicts'] == []
    assert P.driver_work(plan, facts, WORK_SETTINGS, facts['units'], {}) == []


@pytest.mark.parametrize('unit, change, reason', [
    ('nvidia-persistenced.service', {'active': 'inactive', 'sub': 'dead'}, 'nvidia-persistenced: not enabled and running'),
    ('nvidia-persistenced.service', {'enabled': 'disabled'}, 'nvidia-persistenced: not enabled and running'),
    ('nvidia-fabricmanager.service', {'active': 'failed', 'sub': 'failed'},
     'nvidia-fabricmanager: not enabled and running'),
])
def test_stopped_or_disabled_service_is_work(unit, change, reason):
    units = dict(UNITS_RIGHT)
    units[unit] = dict(units[unit], **change)
    plan, facts = _converged(units)
    assert P.driver_work(plan, facts, WORK_SETTINGS, units, {}) == [reason]


def test_units_not_gathered_is_work():
    plan, facts = _converged({})
    work = P.driver_work(plan, facts, WORK_SETTINGS, None, None)
    assert 'nvidia-persistenced: not enabled and running' in work
    assert 'nvidia-fabricmanager: not enabled and running' in work


def test_conflicting_unit_enabled_is_work():
    units = dict(UNITS_RIGHT)
    units['nvidia-pm.service'] = {'load': 'loaded', 'active': 'active', 'sub': 'running', 'enabled': 'enabled'}
    plan, facts = _converged(units)
    assert P.driver_work(plan, facts, WORK_SETTINGS, units, {}) == ['persistence conflicts: nvidia-pm.service']
    assert P.driver_work(plan, facts, dict(WORK_SETTINGS, persistence_conflicts='ignore'), units, {}) == []


def test_nouveau_not_blacklisted_is_work():
    plan, facts = _converged()
    facts['kernel_state']['nouveau']['blacklisted'] = False
    assert P.driver_work(plan, facts, WORK_SETTINGS, UNITS_RIGHT, {}) == ['nouveau: not blacklisted']
    assert P.driver_work(plan, facts, dict(WORK_SETTINGS, blacklist_nouveau=False), UNITS_RIGHT, {}) == []


def test_missing_versionlock_entry_and_missing_extra_are_work():
    facts = running_on('580.95.05')
    node = el_node_with('580.95.05', locks=[])
    node['packages'].pop('libnvidia-nscq')
    plan = P.driver_plan(facts, settings(), node=node)
    work = P.driver_work(plan, facts, dict(WORK_SETTINGS, expected_gpus=0), None, None)
    assert work[0].startswith('extras: libnvidia-nscq')
    assert 'versionlock: plugin or entries missing, or stale entries' in work


def test_driver_not_loaded_is_work_a_gpu_missing_from_nvidia_smi_is_not():
    # No run of the role brings a GPU back: readiness gpu.count says it, the role's last task fails on it.
    plan, facts = _converged()
    facts['nvidia'] = dict(facts['nvidia'], gpus=[])
    assert P.driver_work(plan, facts, WORK_SETTINGS, UNITS_RIGHT, {}) == []
    fresh = {'os': EL9, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA, 'units': UNITS_RIGHT}
    plan = P.driver_plan(fresh, settings(), node={'packages': {}})
    assert 'driver: not the wanted driver, or not loaded' in P.driver_work(plan, fresh, WORK_SETTINGS, UNITS_RIGHT, {})


def test_refused_settings_are_work():
    plan, facts = _converged()
    plan = P.driver_plan(facts, settings(branch='abc'), node=el_node_with('580.95.05'))
    assert P.driver_work(plan, facts, WORK_SETTINGS, UNITS_RIGHT, {})[0].startswith('refused: ')


def _file(content=None, mode='0644', kind='file', target=None):
    import hashlib
    return {'exists': True, 'type': kind, 'mode': mode, 'uid': 0, 'gid': 0, 'size': len(content or ''),
            'sha1': hashlib.sha1(content.encode()).hexdigest() if content is not None else None, 'target': target}


def test_nvlink5_ib_umad_file_is_compared():
    facts = running_on('580.95.05', pci=B200_PCI)
    facts['nvidia'] = smi('580.95.05', arch='Blackwell')
    facts['units'] = UNITS_RIGHT
    facts.pop('services')
    node = el_node_with('580.95.05', nscq='libnvsdm')
    node['packages'].update(rpm('infiniband-diags', '48.0', epoch=0))
    plan = P.driver_plan(facts, settings(), node=node)
    right = {P.IB_UMAD_CONF: _file(P.IB_UMAD_CONF_TEXT)}
    assert P.driver_work(plan, facts, WORK_SETTINGS, UNITS_RIGHT, right) == []
    for files in ({}, {P.IB_UMAD_CONF: _file('ib_umad\n')}, {P.IB_UMAD_CONF: _file(P.IB_UMAD_CONF_TEXT, mode='0600')}):
        assert P.driver_work(plan, facts, WORK_SETTINGS, UNITS_RIGHT, files) == [
            'ib_umad: /etc/modules-load.d/nodeprep-nvlsm.conf missing or different']


def test_ubuntu_dropin_and_wants_link_are_compared():
    facts = running_on('580.95.05', os_facts=UBUNTU)
    facts['units'] = dict(UNITS_RIGHT, **{'nvidia-persistenced.service': dict(
        UNITS_RIGHT['nvidia-persistenced.service'], enabled='static')})
    facts.pop('services')
    node = {'apt_holds': ['nvidia-fabricmanager-580', 'libnvidia-nscq-580'], 'apt_sources_content': None,
            'packages': {}}
    for name in ('nvidia-open', 'nvidia-persistenced', 'nvidia-fabricmanager-580', 'libnvidia-nscq-580'):
        node['packages'][name] = [{'epoch': 0, 'version': '580.95.05', 'release': '0ubuntu1', 'arch': 'amd64'}]
    plan = P.driver_plan(facts, settings(), node=node)
    persist = plan['persistenced']
    files = {persist['dropin_path'].rsplit('/', 1)[0]: _file(mode='0755', kind='directory'),
             persist['dropin_path']: _file(persist['dropin_content']),
             persist['wants_link']: _file(kind='link', target=persist['unit_path'])}
    work = P.driver_work(plan, facts, WORK_SETTINGS, facts['units'], files)
    assert 'nvidia-persistenced: drop-in or wants link missing or different' not in work
    assert 'nvidia-persistenced: not enabled and running' not in work
    files[persist['wants_link']] = _file(kind='link', target='/dev/null')
    assert 'nvidia-persistenced: drop-in or wants link missing or different' in P.driver_work(
        plan, facts, WORK_SETTINGS, facts['units'], files)


# ------------------------------------------------------------------------------------------------ R26: apt compute set

@pytest.mark.parametrize('os_facts, branch, module_type, expected', [
    (UBUNTU, '570', 'open', ['libnvidia-compute-570', 'nvidia-dkms-570-open', 'nvidia-utils-570']),
    (UBUNTU, '580', 'open', ['libnvidia-compute-580', 'nvidia-dkms-580-open', 'nvidia-utils-580']),
    (UBUNTU, '580', 'proprietary', ['libnvidia-compute-580', 'nvidia-dkms-580', 'nvidia-utils-580']),
    (UBUNTU, '590', 'open', ['libnvidia-compute', 'nvidia-dkms-open', 'nvidia-utils']),
    (UBUNTU, '595', 'proprietary', ['libnvidia-compute', 'nvidia-dkms', 'nvidia-utils']),
    (DEBIAN, '595', 'open', ['libnvidia-compute', 'nvidia-dkms-open', 'nvidia-utils']),
])
def test_apt_compute_set(os_facts, branch, module_type, expected):
    facts = {'os': os_facts, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA}
    plan = P.driver_plan(facts, settings(package_set='compute', module_type=module_type, branch=branch))
    assert plan['refusals'] == []
    assert plan['install']['packages'] == expected
    assert plan['install']['pinning_package'] == 'nvidia-driver-pinning-' + branch
    # The set has no nvidia-persistenced either: the extras bring it.
    assert 'nvidia-persistenced' in plan['extras']['packages']


def test_apt_compute_set_on_a_branch_move_is_pinned_to_the_new_branch():
    facts = {'os': UBUNTU, 'kernel_state': kernel(H100_PCI, loaded={'loaded': True, 'version': '580.95.05',
                                                                    'flavour': 'open'},
                                                  dkms=[{'module': 'nvidia', 'version': '580.95.05', 'kernel': K9,
                                                         'status': 'installed'}]),
             'nvidia': smi('580.95.05')}
    plan = P.driver_plan(facts, settings(package_set='compute', branch='590'))
    assert plan['version_change'] is True
    assert plan['install']['packages'] == ['libnvidia-compute=590.*', 'nvidia-dkms-open=590.*', 'nvidia-utils=590.*']
    assert plan['install']['unpin'] == ['nvidia-driver-pinning-580', 'nvidia-driver-pinning-580.95.05']


# ------------------------------------------------------------------------------------------------ R27: EPEL 10.x

ROCKY10_1 = dict(EL10, distribution_version='10.1')
RHEL10_1 = dict(EL10, distribution='RedHat', distribution_version='10.1')
ALMA10_0 = dict(EL10, distribution='AlmaLinux', distribution_version='10.0')
ORACLE10_0 = dict(EL10, distribution='OracleLinux', distribution_version='10.0')
STREAM10 = dict(EL10, distribution='CentOS', distribution_version='10')
EL10_NO_MINOR = dict(EL10, distribution_version='10')
EPEL = 'https://dl.fedoraproject.org/pub/epel/'


@pytest.mark.parametrize('os_facts, release', [
    (EL8, '8'), (EL9, '9'), (EL10, '10.0'), (ROCKY10_1, '10.1'), (RHEL10_1, '10.1'), (ALMA10_0, '10.0'),
    (ORACLE10_0, '10.0'), (STREAM10, '10'), (EL10_NO_MINOR, '10'), (dict(EL10, architecture='aarch64'), '10.0'),
])
def test_epel_directory_per_release(os_facts, release):
    assert P.epel_release(os_facts) == release
    facts = {'os': os_facts, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA}
    epel = P.driver_plan(facts, settings())['epel']
    assert epel['needed'] is True and epel['define'] is True
    assert epel['url'] == '{0}{1}/Everything/{2}/'.format(EPEL, release, os_facts['architecture'])
    # One key per major version (RPM-GPG-KEY-EPEL-10 for every EPEL 10 repository).
    assert epel['gpgkey'] == EPEL + 'RPM-GPG-KEY-EPEL-' + os_facts['distribution_major_version']


@pytest.mark.parametrize('os_release, release', [
    ('NAME="Rocky Linux"\nID="rocky"\nVERSION_ID="10.0"\n', '10.0'),
    ('NAME="Red Hat Enterprise Linux"\nID="rhel"\nVERSION_ID="10.1"\n', '10.1'),
    ('NAME="AlmaLinux"\nID="almalinux"\nVERSION_ID="10.1"\n', '10.1'),
    ('NAME="CentOS Stream"\nID="centos"\nVERSION_ID="10"\n', '10'),
    ('NAME="Rocky Linux"\nID="rocky"\nVERSION_ID="9.6"\n', '9'),
])
def test_epel_directory_from_the_gathered_os_release(os_release, release):
    """The gather's OS identity (_os_release.os_identity, from /etc/os-release) gives what epel_release needs."""
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _os_release
    assert P.epel_release(_os_release.os_identity(os_release, machine='x86_64')) == release


def test_epel_10_repository_of_an_older_minor_is_rewritten():
    """A node upgraded from 10.0 to 10.1 keeps nodeprep-epel at epel/10.0/: the plan rewrites it."""
    node = {'repos': {EPEL_ID: {'baseurl': EPEL + '10.0/Everything/x86_64/', 'enabled': True, 'gpgcheck': True,
                                'gpgkey': EPEL + 'RPM-GPG-KEY-EPEL-10', 'file': '/etc/yum.repos.d/nodeprep-epel.repo'}}}
    facts = {'os': ROCKY10_1, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA}
    assert P.driver_plan(facts, settings(), node=node)['epel']['changes'] is True
    facts['os'] = EL10
    assert P.driver_plan(facts, settings(), node=node)['epel']['changes'] is False


def test_epel_mirror_url_is_used_as_given():
    facts = {'os': ROCKY10_1, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA}
    epel = P.driver_plan(facts, settings(epel_url='https://mirror.example/epel/10.1/'))['epel']
    assert epel['url'] == 'https://mirror.example/epel/10.1/'
    assert epel['gpgkey'] == 'https://mirror.example/epel/10.1/RPM-GPG-KEY-EPEL-10'


EPEL_ID = P.EPEL_REPO_ID


# ------------------------------------------------------------------------------------------------ R28 and Rubin

def rubin_smi(version, arch='Rubin'):
    out = smi(version, arch)
    out['gpus'].append({'index': 1, 'architecture': arch, 'pci_device_id': None})
    return out


@pytest.mark.parametrize('branch, module_type, nvidia, refused', [
    # R28: no proprietary modules from 620 on, on any GPU.
    ('620', 'proprietary', FRESH_NVIDIA, ['proprietary_branch']),
    ('625', 'proprietary', smi('580.95.05'), ['proprietary_branch']),
    ('615', 'proprietary', FRESH_NVIDIA, []),
    ('610', 'proprietary', smi('580.95.05'), []),
    ('620', 'open', FRESH_NVIDIA, []),
    # Rubin (nvidia-smi's name): 615 or later.
    ('610', 'open', rubin_smi('615.71.09'), ['rubin']),
    ('590', 'open', rubin_smi('615.71.09', 'Rubin Ultra'), ['rubin']),
    ('615', 'open', rubin_smi('615.71.09'), []),
    ('620', 'open', rubin_smi('615.71.09'), []),
    # Rubin and proprietary: the Blackwell-or-newer rule refuses it too.
    ('620', 'proprietary', rubin_smi('615.71.09'), ['proprietary', 'proprietary_branch']),
    ('580', 'proprietary', rubin_smi('615.71.09'), ['proprietary', 'rubin']),
    # No driver loaded: no public Rubin PCI ID, so nothing tells a Rubin GPU (and 580 is not refused).
    ('580', 'open', FRESH_NVIDIA, []),
])
def test_branch_and_architecture_refusals(branch, module_type, nvidia, refused):
    facts = {'os': EL9, 'kernel_state': kernel(H100_PCI), 'nvidia': nvidia}
    plan = P.driver_plan(facts, settings(branch=branch, module_type=module_type))
    assert sorted(plan['refused']) == sorted(refused)
    assert ('install' in plan) is (not refused)


def test_rubin_refusal_names_host_gpus_value_and_what_is_allowed():
    facts = {'os': UBUNTU, 'kernel_state': kernel(H100_PCI), 'nvidia': rubin_smi('615.71.09'), 'host': 'gpu07'}
    plan = P.driver_plan(facts, settings(branch='595'))
    assert plan['refusals'] == [
        'nodeprep_nvidia_driver_branch=595 cannot drive the GPUs of gpu07 (nvidia-smi reports GPU 0, 1 as Rubin): '
        'Rubin GPUs need branch 615 or later; allowed here: 615 or a later branch.']


def test_proprietary_620_refusal_names_the_host():
    facts = {'os': EL9, 'kernel_state': kernel(H100_PCI), 'nvidia': FRESH_NVIDIA, 'host': 'gpu07'}
    plan = P.driver_plan(facts, settings(branch='620', module_type='proprietary'))
    assert plan['refused']['proprietary_branch'].startswith(
        'nodeprep_nvidia_driver_module_type=proprietary cannot be installed on gpu07 with '
        'nodeprep_nvidia_driver_branch=620: ')


def test_rubin_is_told_by_nvidia_smi_only():
    """No Rubin PCI device ID is public (RUBIN_DEVICE_ID_RANGES): a GPU is Rubin only by nvidia-smi's name."""
    assert P.rubin_reasons(FRESH_NVIDIA) == []
    assert P.rubin_reasons(smi('580.95.05', 'Hopper')) == []
    assert P.rubin_reasons(smi('615.71.09', 'RUBIN')) == ['nvidia-smi reports GPU 0 as Rubin']


# ------------------------------------------------------------------------------------------------ what the run did

@pytest.mark.parametrize('run, wanted', [
    # modprobe skipped (the driver was loaded): nothing of it is read.
    ({'start_version': '570.172.08', 'installing': 'True',
      'modprobe': {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}},
     {'stage': 'start', 'start_version': '570.172.08', 'installing': True, 'modprobe': {}, 'files': [],
      'initramfs': False}),
    # modprobe failed (module held by the initramfs): its rc and stderr, as registered.
    ({'stage': 'installed', 'start_version': '', 'installing': False,
      'modprobe': {'changed': False, 'rc': 1, 'stdout': '', 'stderr': 'modprobe: ERROR: could not insert nvidia',
                   'cmd': ['modprobe', 'nvidia'], 'failed': False}},
     {'stage': 'installed', 'start_version': '', 'installing': False, 'files': [], 'initramfs': False,
      'modprobe': {'rc': 1, 'stdout': '', 'stderr': 'modprobe: ERROR: could not insert nvidia'}}),
    # The registered result of the role's modprobe loop: the one item that ran.
    ({'modprobe': {'changed': False, 'results': [{'rc': 0, 'stdout': '', 'stderr': '', 'item': ['modprobe', 'nvidia']}]},
      'files': ['/etc/modprobe.d/blacklist-nouveau.conf'], 'initramfs': 'true'},
     {'stage': 'start', 'start_version': '', 'installing': False, 'files': ['/etc/modprobe.d/blacklist-nouveau.conf'],
      'initramfs': True, 'modprobe': {'rc': 0, 'stdout': '', 'stderr': ''}}),
    ({}, {'stage': 'start', 'start_version': '', 'installing': False, 'modprobe': {}, 'files': [], 'initramfs': False}),
    (None, {'stage': 'start', 'start_version': '', 'installing': False, 'modprobe': {}, 'files': [],
            'initramfs': False}),
])
def test_run_state(run, wanted):
    assert P.run_state(run) == wanted


def test_run_state_names_a_stage_it_does_not_know():
    with pytest.raises(ValueError) as exc:
        P.run_state({'stage': 'loaded'})
    assert str(exc.value) == "run.stage='loaded': allowed start, installed, rebooted"
