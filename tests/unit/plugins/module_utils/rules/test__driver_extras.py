# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decision tables of the nvidia_driver extras (plugins/module_utils/rules/_driver.py): R21 (apt release of NVIDIA's
fabric manager, nscq, nvsdm and imex: '-1' below 590, '-1ubuntu1' from 590 on, matched by '<V>-*'; persistenced and
imex pinned on apt as well) and R22 (NVLink 5: nvlsm with infiniband-diags, NVSDM instead of nscq, x86_64 only).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import fnmatch

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver as P
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _driver_packages

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules.test__driver import (
    B200_PCI, EL10, H100_PCI, K9, UBUNTU, el_node_with, kernel, running_on, settings)

K10 = '6.12.0-55.el10.x86_64'


def deb(version, release):
    return [{'epoch': 0, 'version': version, 'release': release, 'arch': 'amd64'}]


def ubuntu_running(version, pci=None, arch='x86_64'):
    facts = running_on(version, pci=pci or H100_PCI, os_facts=dict(UBUNTU, architecture=arch))
    facts['kernel_state']['dkms'] = [{'module': 'nvidia', 'version': version, 'kernel': K9, 'status': 'installed'}]
    return facts


def el10_b200_running(version, arch='x86_64'):
    facts = running_on(version, pci=B200_PCI, os_facts=dict(EL10, architecture=arch))
    facts['kernel_state'] = kernel(B200_PCI, loaded={'loaded': True, 'version': version, 'flavour': 'open'},
                                   dkms=[{'module': 'nvidia-open', 'version': version, 'kernel': K10,
                                          'status': 'installed'}], running=K10)
    return facts


# ------------------------------------------------------------------------------------------------ R21: the pin form

@pytest.mark.parametrize('family, name, version, spec', [
    ('el', 'nvidia-fabricmanager', '590.48.01', 'nvidia-fabricmanager-590.48.01'),
    ('debian', 'nvidia-fabricmanager', '590.48.01', 'nvidia-fabricmanager=590.48.01-*'),
    ('debian', 'nvidia-fabricmanager-570', '570.195.03', 'nvidia-fabricmanager-570=570.195.03-*'),
    ('debian', 'nvidia-imex', '595.91.07', 'nvidia-imex=595.91.07-*'),
    ('debian', 'nvlsm', '', 'nvlsm'),
    ('el', 'nvlsm', '', 'nvlsm'),
])
def test_package_spec(family, name, version, spec):
    assert P.package_spec(family, name, version) == spec


# Real Debian versions of NVIDIA's packages (tests/testbed/REALITY.md, R21): the pattern must match every release
# NVIDIA used at the driver's version and nothing of another version.  fnmatch is what ansible.builtin.apt applies
# to a 'name=version*' specifier.
@pytest.mark.parametrize('driver, debian_version, matches', [
    ('580.126.20', '580.126.20-1', True),
    ('580.82.07', '580.82.07-1', True),
    ('595.91.07', '595.91.07-1ubuntu1', True),
    ('595.58.03', '595.58.03-1ubuntu1', True),
    ('595.71.05', '595.71.05-1ubuntu1', True),
    ('580.65.06', '580.65.06-0ubuntu1', True),
    ('590.48.01', '590.48.011-1ubuntu1', False),
    ('590.48.01', '590.48.02-1ubuntu1', False),
    ('590.48.01', '590.48.01', False),
])
def test_apt_version_pattern_matches_nvidia_releases(driver, debian_version, matches):
    assert fnmatch.fnmatchcase(debian_version, P.apt_version_pattern(driver)) is matches


# ------------------------------------------------------------------------------------------------ R21: apt extras

@pytest.mark.parametrize('version, fm, nscq', [
    ('570.195.03', 'nvidia-fabricmanager-570', 'libnvidia-nscq-570'),
    ('580.95.05', 'nvidia-fabricmanager', 'libnvidia-nscq'),
    ('590.48.01', 'nvidia-fabricmanager', 'libnvidia-nscq'),
    ('595.91.07', 'nvidia-fabricmanager', 'libnvidia-nscq'),
])
def test_ubuntu_extras_pinned_at_the_driver_version(version, fm, nscq):
    branch = version.split('.')[0]
    plan = P.driver_plan(ubuntu_running(version), settings(branch=branch, imex=True), node={'packages': {}})
    pin = version + '-*'
    assert plan['extras']['packages'] == ['nvidia-persistenced=' + pin, 'nvidia-imex=' + pin,
                                          '{0}={1}'.format(fm, pin), '{0}={1}'.format(nscq, pin)]
    assert plan['extras']['missing'] == plan['extras']['packages']
    assert plan['extras']['hold'] == [fm, nscq]
    assert plan['extras']['version'] == version


def test_ubuntu_595_installed_with_1ubuntu1_is_converged():
    version = '595.91.07'
    node = {'packages': dict((n, deb(version, '1ubuntu1')) for n in (
        'nvidia-open', 'nvidia-persistenced', 'nvidia-imex', 'nvidia-fabricmanager', 'libnvidia-nscq')),
        'apt_holds': ['nvidia-fabricmanager', 'libnvidia-nscq']}
    plan = P.driver_plan(ubuntu_running(version), settings(branch='595', imex=True), node=node)
    assert plan['ok'] is True
    assert plan['extras']['missing'] == [] and plan['extras']['remove'] == []
    assert plan['extras']['needed'] is False


def test_ubuntu_persistenced_of_another_version_is_moved_to_the_driver_version():
    # The branch pinning package lets apt pick any 590 build; the extras follow the installed driver (R21).
    node = {'packages': {'nvidia-open': deb('590.48.01', '1ubuntu1'),
                         'nvidia-persistenced': deb('590.44.01', '1ubuntu1')}}
    pci = dict(H100_PCI, nvswitches=[], nvswitch_count=0, nvswitch_fabric='none')
    plan = P.driver_plan(ubuntu_running('590.48.01', pci=pci), settings(branch='590'), node=node)
    assert plan['extras']['missing'] == ['nvidia-persistenced=590.48.01-*']


def test_el9_streams_leave_persistenced_and_imex_unversioned():
    plan = P.driver_plan(running_on('580.95.05'), settings(imex=True), node=el_node_with('580.95.05'))
    assert plan['extras']['packages'][:2] == ['nvidia-persistenced', 'nvidia-imex']


def test_ubuntu_version_unknown_before_install_leaves_names_bare():
    fresh = {'present': False, 'error': 'absent', 'driver_version': None, 'gpus': []}
    facts = {'os': UBUNTU, 'kernel_state': kernel(H100_PCI), 'nvidia': fresh}
    plan = P.driver_plan(facts, settings(branch='590'), node={'packages': {}}, check_mode=True)
    assert plan['extras']['packages'] == ['nvidia-persistenced', 'nvidia-fabricmanager', 'libnvidia-nscq']
    assert plan['extras']['version_known'] is False and plan['predict']['extras'] is True


# ------------------------------------------------------------------------------------------------ R22: NVLink 5

@pytest.mark.parametrize('branch, nvsdm', [('570', 'libnvsdm-570'), ('580', 'libnvsdm'), ('590', 'libnvsdm'),
                                           ('595', 'libnvsdm')])
def test_nvsdm_names(branch, nvsdm):
    assert P.nvsdm_package('el', branch) == nvsdm
    assert P.nvsdm_package('debian', branch) == nvsdm


@pytest.mark.parametrize('version, nvsdm', [('580.95.05', 'libnvsdm'), ('570.172.08', 'libnvsdm-570')])
def test_el10_b200_gets_infiniband_diags_and_nvsdm_not_nscq(version, nvsdm):
    branch = version.split('.')[0]
    plan = P.driver_plan(el10_b200_running(version), settings(branch=branch), node={'packages': {}})
    assert plan['fabric']['kind'] == 'nvlink5'
    assert plan['fabric']['nvsdm'] is True and plan['fabric']['nscq'] is False
    assert plan['fabric']['nvlink5_packages'] == ['infiniband-diags']
    fm = P.fabricmanager_package('el', branch)
    assert plan['extras']['packages'] == ['nvidia-persistenced-' + version, 'nvlsm', 'infiniband-diags',
                                          '{0}-{1}'.format(fm, version), '{0}-{1}'.format(nvsdm, version)]
    assert not [p for p in plan['extras']['packages'] if 'nscq' in p]


def test_ubuntu_b200_590_nvsdm_pinned_and_held():
    plan = P.driver_plan(ubuntu_running('590.48.01', pci=B200_PCI), settings(branch='590'), node={'packages': {}})
    assert plan['extras']['packages'] == ['nvidia-persistenced=590.48.01-*', 'nvlsm', 'infiniband-diags',
                                          'nvidia-fabricmanager=590.48.01-*', 'libnvsdm=590.48.01-*']
    assert plan['extras']['hold'] == ['nvidia-fabricmanager', 'libnvsdm']


def test_b200_nscq_left_by_an_older_run_is_removed():
    node = {'packages': {'nvidia-open': deb('590.48.01', '1ubuntu1'),
                         'nvidia-persistenced': deb('590.48.01', '1ubuntu1'),
                         'nvlsm': deb('2025.06.4', '1'), 'infiniband-diags': deb('50.0', '2'),
                         'nvidia-fabricmanager': deb('590.48.01', '1ubuntu1'),
                         'libnvidia-nscq': deb('590.48.01', '1ubuntu1'),
                         'libnvsdm': deb('590.48.01', '1ubuntu1')},
            'apt_holds': ['nvidia-fabricmanager', 'libnvidia-nscq', 'libnvsdm']}
    plan = P.driver_plan(ubuntu_running('590.48.01', pci=B200_PCI), settings(branch='590'), node=node)
    assert plan['extras']['remove'] == ['libnvidia-nscq']
    assert plan['extras']['unhold'] == ['libnvidia-nscq']
    assert plan['extras']['missing'] == []


def test_b200_converged_el10_node_wants_nothing():
    version = '580.95.05'
    packages = {}
    for name in ('nvidia-open', 'nvidia-persistenced', 'nvidia-fabricmanager', 'libnvsdm'):
        packages[name] = [{'epoch': 3, 'version': version, 'release': '1.el10', 'arch': 'x86_64'}]
    packages['nvlsm'] = [{'epoch': 0, 'version': '2025.06.4', 'release': '1.el10', 'arch': 'x86_64'}]
    packages['infiniband-diags'] = [{'epoch': 0, 'version': '48.0', 'release': '1.el10', 'arch': 'noarch'}]
    plan = P.driver_plan(el10_b200_running(version), settings(), node={'packages': packages})
    assert plan['extras']['missing'] == [] and plan['extras']['remove'] == []


def test_b200_arm64_has_no_nvsdm():
    plan = P.driver_plan(ubuntu_running('590.48.01', pci=B200_PCI, arch='aarch64'), settings(branch='590'),
                         node={'packages': {}})
    assert plan['fabric']['nvsdm'] is False and plan['fabric']['nscq'] is False
    assert [p.split('=')[0] for p in plan['extras']['packages']] == [
        'nvidia-persistenced', 'nvlsm', 'infiniband-diags', 'nvidia-fabricmanager']


def test_b200_without_the_switch_library():
    plan = P.driver_plan(el10_b200_running('580.95.05'), settings(nscq=False), node={'packages': {}})
    assert plan['fabric']['nvsdm'] is False
    assert 'infiniband-diags' in plan['extras']['packages']


def test_hopper_keeps_nscq_and_has_no_nvlink5_packages():
    plan = P.driver_plan(running_on('580.95.05', os_facts=EL10), settings(), node={'packages': {}})
    assert plan['fabric']['nscq'] is True and plan['fabric']['nvsdm'] is False
    assert plan['fabric']['nvlink5_packages'] == []
    assert 'infiniband-diags' not in plan['extras']['packages']


@pytest.mark.parametrize('name, kept', [('libnvsdm', True), ('libnvsdm-570', True), ('infiniband-diags', True),
                                        ('libnvsdm-dev', False), ('rdma-core', False)])
def test_keep_package(name, kept):
    assert _driver_packages.keep_package(name) is kept


@pytest.mark.parametrize('name, fabric', [('libnvsdm', True), ('libnvsdm-570', True), ('libnvidia-nscq', True),
                                          ('infiniband-diags', False), ('nvlsm', False)])
def test_fabric_package_names(name, fabric):
    assert bool(P.fabric_package_names('debian').match(name)) is fabric
