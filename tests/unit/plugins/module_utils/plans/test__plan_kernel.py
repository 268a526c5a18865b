# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel role's plan (plugins/module_utils/plans/_plan_kernel.py): facts + settings -> plan (every decision the role's
tasks read: the target kernel, the installation, the devel package, grubby, the reboot), settings typed once
(``-e nodeprep_reboot_ok=false`` never allows a reboot), and the readiness check kernel.devel_matched as its drift."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_kernel as K
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

EL9 = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
       'distribution_major_version': '9', 'architecture': 'x86_64'}
EL10 = dict(EL9, distribution_version='10.0', distribution_major_version='10')
UBUNTU = {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_version': '22.04',
          'distribution_major_version': '22', 'architecture': 'x86_64'}
DEBIAN = {'os_family': 'Debian', 'distribution': 'Debian', 'distribution_version': '12',
          'distribution_major_version': '12', 'architecture': 'x86_64'}
SUSE = {'os_family': 'Suse', 'distribution': 'SLES', 'distribution_version': '15.6',
        'distribution_major_version': '15', 'architecture': 'x86_64'}
K9 = '5.14.0-570.el9.x86_64'
K9_NEW = '5.14.0-611.el9.x86_64'
LT = '6.1.100-1.el9.elrepo.x86_64'
U_GA = '5.15.0-140-generic'
U_HWE = '6.8.0-60-generic'


LT_OLD = '6.1.90-1.el9.elrepo.x86_64'
ML = '6.15.2-1.el9.elrepo.x86_64'
K8 = '4.18.0-553.el8_10.x86_64'
K10 = '6.12.0-55.el10.x86_64'
DEB = '6.1.0-37-amd64'
# kernel_state.packages as _kernel_state.kernel_packages makes them from rpm -qa / dpkg-query -W.
EL9_DISTRO = {'kernel': [K9], 'kernel-core': [K9]}
UBUNTU_GA = {'linux-generic': ['5.15.0.140.135'], 'linux-image-' + U_GA: ['5.15.0-140.150']}


def facts(os_info, running, default=None, devel=None, packages=None):
    """ansible_facts after the kernel gather: kernel_state with the OS and the installed kernel packages."""
    return {'nodeprep_gathered': ['kernel'],
            'kernel_state': {'running': running, 'default': default, 'devel': devel or {}, 'os': dict(os_info),
                             'packages': EL9_DISTRO if packages is None else packages}}


def make_plan(ansible_facts, given=None, check_mode=False, run=None):
    settings, problems = _plans.typed_settings('kernel', given or {})
    return _plans.plan_role('kernel', ansible_facts, settings, problems, _plan.new_context(
        host='node1', check_mode=check_mode, extra={'run': {'kernel': run}} if run else None))


def _role_yaml(*parts):
    with open(os.path.join(ROOT, 'roles', 'kernel', *parts)) as handle:
        return yaml.safe_load(handle)


# --------------------------------------------------------------------------------------- settings: one source

def test_argument_specs_are_the_settings():
    options = _role_yaml('meta', 'argument_specs.yml')['argument_specs']['main']['options']
    assert sorted(options) == sorted(K.SETTINGS)
    for name, spec in K.SETTINGS.items():
        option = dict(options[name])
        description = option.pop('description')
        assert ([description] if isinstance(description, str) else description) == spec['description'], name
        assert option == dict((k, v) for k, v in spec.items() if k != 'description' and
                              (v is not None or k != 'default')), name


def test_defaults_are_the_settings_defaults():
    defaults = _role_yaml('defaults', 'main.yml')
    assert sorted(defaults) == sorted(set(K.SETTINGS) - set(K.SHARED))
    for name, value in defaults.items():
        if name == 'nodeprep_kernel_reboot_ok':
            assert value == '{{ nodeprep_reboot_ok | default(false) }}'
            assert K.SETTINGS[name]['default'] is None
        else:
            assert value == K.SETTINGS[name]['default'], name


@pytest.mark.parametrize('os_info, name', [(EL9, 'RedHat'), (EL10, 'RedHat'), (UBUNTU, 'Ubuntu'),
                                           (DEBIAN, 'Debian'), (SUSE, 'default')])
def test_os_vars_name_takes_the_most_specific_entry(os_info, name):
    assert K.os_vars_name(os_info) == name


# --------------------------------------------------------------------------------------- facts + settings -> plan

NO_INSTALL = {'module': None, 'name': [], 'enablerepo': None}


def distro_devel(release):
    return 'kernel-devel-uname-r = ' + release


# name, facts, settings, then what the tasks read: target, install, devel {needed, package}, set_default, reasons
DECISIONS = [
    ('EL9 distro kernel booting with its devel tree',
     facts(EL9, K9, K9, {K9: True}), {},
     K9, NO_INSTALL, (False, distro_devel(K9)), False, []),
    ('EL9 devel tree missing',
     facts(EL9, K9, K9, {}), {},
     K9, NO_INSTALL, (True, distro_devel(K9)), False,
     ['devel: /lib/modules/5.14.0-570.el9.x86_64/build does not resolve: kernel-devel-uname-r = '
      '5.14.0-570.el9.x86_64 is not installed']),
    ('EL9 devel tree missing, manage_devel false as text',
     facts(EL9, K9, K9, {}), {'nodeprep_kernel_manage_devel': 'false'},
     K9, NO_INSTALL, (False, distro_devel(K9)), False, []),
    ('EL9 devel tree of another release only',
     facts(EL9, K9, K9, {K9_NEW: True}), {},
     K9, NO_INSTALL, (True, distro_devel(K9)), False,
     ['devel: /lib/modules/5.14.0-570.el9.x86_64/build does not resolve: kernel-devel-uname-r = '
      '5.14.0-570.el9.x86_64 is not installed']),
    ('EL9 a newer distro kernel boots next: kept, reboot into it',
     facts(EL9, K9, K9_NEW, {K9_NEW: True}, {'kernel-core': [K9, K9_NEW]}), {},
     K9_NEW, NO_INSTALL, (False, distro_devel(K9_NEW)), False,
     ['reboot: running 5.14.0-570.el9.x86_64, 5.14.0-611.el9.x86_64 boots next']),
    ('EL9 an older distro kernel chosen by the admin boots next: kept',
     facts(EL9, K9, K9, {K9: True}, {'kernel-core': [K9, K9_NEW]}), {},
     K9, NO_INSTALL, (False, distro_devel(K9)), False, []),
    ('EL9 boot loader default unknown: grubby sets the running kernel',
     facts(EL9, K9, None, {K9: True}), {},
     K9, NO_INSTALL, (False, distro_devel(K9)), True,
     ['kernel: 5.14.0-570.el9.x86_64 must boot next (the boot loader default is unknown)']),
    ('EL9 boot loader default unknown, set_default off as text',
     facts(EL9, K9, None, {K9: True}), {'nodeprep_kernel_set_default': 'no'},
     K9, NO_INSTALL, (False, distro_devel(K9)), False, []),
    ('EL9 an ELRepo kernel boots, distro wanted: the newest distro kernel',
     facts(EL9, LT, LT, {LT: True, K9_NEW: True}, {'kernel-core': [K9, K9_NEW], 'kernel-lt-core': [LT]}), {},
     K9_NEW, NO_INSTALL, (False, distro_devel(K9_NEW)), True,
     ['kernel: 5.14.0-611.el9.x86_64 must boot next (the boot loader default is 6.1.100-1.el9.elrepo.x86_64)',
      'reboot: running 6.1.100-1.el9.elrepo.x86_64, 5.14.0-611.el9.x86_64 boots next']),
    ('EL9 an ELRepo kernel boots, distro wanted, no distro kernel installed',
     facts(EL9, LT, LT, {LT: True}, {'kernel-lt': [LT], 'kernel-lt-core': [LT]}), {},
     '(newest kernel to be installed)', {'module': 'dnf', 'name': ['kernel'], 'enablerepo': None}, (False, None),
     True,
     ['install: kernel (Rocky 9.6 has no kernel installed of nodeprep_kernel_source=distro)',
      'devel: no kernel of the chosen source is installed yet (kernel), so neither is its devel/headers package',
      'kernel: (newest kernel to be installed) must boot next (the boot loader default is '
      '6.1.100-1.el9.elrepo.x86_64)',
      'reboot: running 6.1.100-1.el9.elrepo.x86_64, (newest kernel to be installed) boots next']),
    ('EL9 ELRepo kernel-lt installed and booting: nothing to do (the repository is written only to install from it)',
     facts(EL9, LT, LT, {LT: True}, {'kernel-lt': [LT], 'kernel-lt-core': [LT]}), {'nodeprep_kernel_source': 'elrepo-lt'},
     LT, NO_INSTALL, (False, 'kernel-lt-devel-6.1.100-1.el9.elrepo'), False,
     []),
    ('EL9 ELRepo kernel-lt installed twice, distro kernel boots next: the newest kernel-lt',
     facts(EL9, K9, K9, {K9: True}, dict(EL9_DISTRO, **{'kernel-lt-core': [LT_OLD, LT]})),
     {'nodeprep_kernel_source': 'elrepo-lt'},
     LT, NO_INSTALL, (True, 'kernel-lt-devel-6.1.100-1.el9.elrepo'), True,
     ['devel: /lib/modules/6.1.100-1.el9.elrepo.x86_64/build does not resolve: kernel-lt-devel-6.1.100-1.el9.elrepo is '
      'not installed',
      'kernel: 6.1.100-1.el9.elrepo.x86_64 must boot next (the boot loader default is 5.14.0-570.el9.x86_64)',
      'reboot: running 5.14.0-570.el9.x86_64, 6.1.100-1.el9.elrepo.x86_64 boots next']),
    ('EL9 ELRepo kernel-ml not installed yet (the check-mode placeholder)',
     facts(EL9, K9, K9, {K9: True}), {'nodeprep_kernel_source': 'elrepo-ml'},
     '(newest kernel-ml to be installed)',
     {'module': 'dnf', 'name': ['kernel-ml', 'kernel-ml-devel'], 'enablerepo': 'elrepo-kernel'}, (False, None), True,
     ['install: kernel-ml, kernel-ml-devel (Rocky 9.6 has no kernel installed of nodeprep_kernel_source=elrepo-ml)',
      'devel: no kernel of the chosen source is installed yet (kernel-ml), so neither is its devel/headers package',
      'kernel: (newest kernel-ml to be installed) must boot next (the boot loader default is 5.14.0-570.el9.x86_64)',
      'reboot: running 5.14.0-570.el9.x86_64, (newest kernel-ml to be installed) boots next']),
    ('EL9 ELRepo kernel-ml installed by the run (the gather after the installation)',
     facts(EL9, K9, K9, {K9: True, ML: True}, dict(EL9_DISTRO, **{'kernel-ml': [ML], 'kernel-ml-core': [ML]})),
     {'nodeprep_kernel_source': 'elrepo-ml'},
     ML, NO_INSTALL, (False, 'kernel-ml-devel-6.15.2-1.el9.elrepo'), True,
     ['kernel: 6.15.2-1.el9.elrepo.x86_64 must boot next (the boot loader default is 5.14.0-570.el9.x86_64)',
      'reboot: running 5.14.0-570.el9.x86_64, 6.15.2-1.el9.elrepo.x86_64 boots next']),
    ('EL9 ELRepo kernel-ml wanted without its devel package',
     facts(EL9, K9, K9, {K9: True}), {'nodeprep_kernel_source': 'elrepo-ml', 'nodeprep_kernel_manage_devel': False},
     '(newest kernel-ml to be installed)',
     {'module': 'dnf', 'name': ['kernel-ml'], 'enablerepo': 'elrepo-kernel'}, (False, None), True,
     ['install: kernel-ml (Rocky 9.6 has no kernel installed of nodeprep_kernel_source=elrepo-ml)',
      'kernel: (newest kernel-ml to be installed) must boot next (the boot loader default is 5.14.0-570.el9.x86_64)',
      'reboot: running 5.14.0-570.el9.x86_64, (newest kernel-ml to be installed) boots next']),
    ('EL8 distro kernel devel by its uname-r provide',
     facts(dict(EL9, distribution_version='8.10', distribution_major_version='8'), K8, K8, {}), {},
     K8, NO_INSTALL, (True, distro_devel(K8)), False,
     ['devel: /lib/modules/4.18.0-553.el8_10.x86_64/build does not resolve: kernel-devel-uname-r = '
      '4.18.0-553.el8_10.x86_64 is not installed']),
    ('EL10 kernel-ml is published',
     facts(EL10, K10, K10, {K10: True}, {'kernel-core': [K10], 'kernel-ml-core': [ML]}),
     {'nodeprep_kernel_source': 'elrepo-ml'},
     ML, NO_INSTALL, (True, 'kernel-ml-devel-6.15.2-1.el9.elrepo'), True,
     ['devel: /lib/modules/6.15.2-1.el9.elrepo.x86_64/build does not resolve: kernel-ml-devel-6.15.2-1.el9.elrepo is '
      'not installed',
      'kernel: 6.15.2-1.el9.elrepo.x86_64 must boot next (the boot loader default is 6.12.0-55.el10.x86_64)',
      'reboot: running 6.12.0-55.el10.x86_64, 6.15.2-1.el9.elrepo.x86_64 boots next']),
    ('Ubuntu GA kernel with headers',
     facts(UBUNTU, U_GA, U_GA, {U_GA: True}, UBUNTU_GA), {},
     U_GA, NO_INSTALL, (False, 'linux-headers-' + U_GA), False, []),
    ('Ubuntu custom kernel without a headers package: the package is named, the install will say it is missing',
     facts(UBUNTU, '6.9.0-custom', '6.9.0-custom', {}, UBUNTU_GA), {},
     '6.9.0-custom', NO_INSTALL, (True, 'linux-headers-6.9.0-custom'), False,
     ['devel: /lib/modules/6.9.0-custom/build does not resolve: linux-headers-6.9.0-custom is not installed']),
    ('Ubuntu HWE wanted, its meta package not installed (the check-mode placeholder)',
     facts(UBUNTU, U_GA, U_GA, {U_GA: True}, UBUNTU_GA), {'nodeprep_kernel_source': 'hwe'},
     '(newest linux-generic-hwe-22.04 to be installed)',
     {'module': 'apt', 'name': ['linux-generic-hwe-22.04'], 'enablerepo': None}, (False, None), False,
     ['install: linux-generic-hwe-22.04 (not installed)',
      'devel: no kernel of the chosen source is installed yet (linux-generic-hwe-22.04), so neither is its '
      'devel/headers package',
      'reboot: running 5.15.0-140-generic, (newest linux-generic-hwe-22.04 to be installed) boots next']),
    ('Ubuntu HWE installed, boots next',
     facts(UBUNTU, U_GA, U_HWE, {U_HWE: True}, dict(UBUNTU_GA, **{'linux-generic-hwe-22.04': ['6.8.0.60.63']})),
     {'nodeprep_kernel_source': 'hwe'},
     U_HWE, NO_INSTALL, (False, 'linux-headers-' + U_HWE), False,
     ['reboot: running 5.15.0-140-generic, 6.8.0-60-generic boots next']),
    ('Debian without a boot loader default',
     facts(DEBIAN, DEB, None, {DEB: True}, {'linux-image-amd64': ['6.1.137-1']}), {},
     DEB, NO_INSTALL, (False, 'linux-headers-' + DEB), False, []),
]


@pytest.mark.parametrize('name, state, given, target, install, devel, set_default, reasons', DECISIONS,
                         ids=[case[0] for case in DECISIONS])
def test_decision_table(name, state, given, target, install, devel, set_default, reasons):
    plan = make_plan(state, given)
    assert (plan['problems'], plan['errors'], plan['missing']) == ([], [], [])
    args = plan['args']['kernel']
    assert args['target'] == target
    assert args['pending'] is target.startswith('(newest ')
    assert args['install'] == install
    assert (args['devel']['needed'], args['devel']['package']) == devel
    assert args['devel']['release'] == target
    assert args['set_default'] is set_default
    assert plan['reasons'] == reasons
    running = state['kernel_state']['running']
    why = [] if target == running else ['kernel: running {0}, the kernel that boots next is {1}'.format(running, target)]
    assert plan['reboot'] == {'needed': bool(why), 'why': why, 'allowed': False, 'timeout': 1800, 'before': []}
    assert plan['run'] == reasons


REFUSALS = [
    ('EL10 has no kernel-lt', facts(EL10, K10, K10, {}), {'nodeprep_kernel_source': 'elrepo-lt'},
     'nodeprep_kernel_source=elrepo-lt is not available on EL10: ELRepo publishes kernel-lt only for EL8/EL9 (there is '
     'no kernel-lt for EL10, only kernel-ml). Allowed here: distro, elrepo-ml.'),
    ('Debian has no HWE kernel', facts(DEBIAN, DEB, None, {}), {'nodeprep_kernel_source': 'hwe'},
     'nodeprep_kernel_source=hwe is not available on Debian 12; allowed here: distro (hwe exists on Ubuntu only, '
     'elrepo-lt and elrepo-ml on EL only).'),
    ('ELRepo on Ubuntu', facts(UBUNTU, U_GA, U_GA, {}), {'nodeprep_kernel_source': 'elrepo-ml'},
     'nodeprep_kernel_source=elrepo-ml is not available on Ubuntu 22.04; allowed here: distro, hwe (hwe exists on '
     'Ubuntu only, elrepo-lt and elrepo-ml on EL only).'),
    ('HWE on EL', facts(EL9, K9, K9, {}), {'nodeprep_kernel_source': 'hwe'},
     'nodeprep_kernel_source=hwe is not available on Rocky 9.6; allowed here: distro, elrepo-lt, elrepo-ml (hwe exists '
     'on Ubuntu only, elrepo-lt and elrepo-ml on EL only).'),
    ('an OS the role does not support', facts(SUSE, '6.4.0-150600', None, {}), {},
     'gpufleet.nodeprep.kernel supports EL 8/9/10, Ubuntu 22.04/24.04 and Debian 12; this host runs SLES 15.6 '
     '(os_family Suse)'),
    ('the package database could not be read', facts(EL9, K9, K9, {K9: True}, packages=False),
     {'nodeprep_kernel_source': 'elrepo-lt'},
     'the installed kernel packages could not be read (rpm -qa; see the warnings of the gather), so the kernels of '
     'nodeprep_kernel_source=elrepo-lt cannot be told'),
]


@pytest.mark.parametrize('name, state, given, error', REFUSALS, ids=[case[0] for case in REFUSALS])
def test_refusals_name_the_value_and_what_is_allowed(name, state, given, error):
    if state['kernel_state']['packages'] is False:
        state['kernel_state']['packages'] = None
    plan = make_plan(state, given)
    assert plan['problems'] == [] and plan['errors'] == [error]
    assert plan['args']['kernel'] is None and plan['reasons'] == []
    assert plan['run'] == [error]
    check = _readiness.plan_check(K.CHECK, plan)
    assert (check['status'], check['observed']) == ('fail', 'the kernel role cannot run here: ' + error)


def test_a_distro_kernel_needs_no_package_list():
    """A distro kernel wanted and booting: the package list is not read (a custom kernel no package owns stays)."""
    state = facts(EL9, '6.9.0-custom', '6.9.0-custom', {'6.9.0-custom': True})
    state['kernel_state']['packages'] = None
    plan = make_plan(state)
    assert plan['errors'] == [] and plan['reasons'] == [] and plan['args']['kernel']['target'] == '6.9.0-custom'


def test_boot_devel_is_for_the_kernel_that_boots_next():
    """The devel/headers of the kernel that boots next, whatever the target and the kernel role's source (the
    nvidia_driver role builds against it): boot_devel tells the source of that release from the package that holds
    it, as `rpm -qf` on its /lib/modules folder did."""
    assert K.boot_devel(facts(EL9, K9, LT, {K9: True}, {'kernel-core': [K9], 'kernel-lt-core': [LT]})) == {
        'family': 'el', 'release': LT, 'needed': True, 'package': 'kernel-lt-devel-6.1.100-1.el9.elrepo'}
    assert K.boot_devel(facts(EL9, K9, ML, {ML: True}, {'kernel-core': [K9], 'kernel-ml-core': [ML]})) == {
        'family': 'el', 'release': ML, 'needed': False, 'package': 'kernel-ml-devel-6.15.2-1.el9.elrepo'}
    assert K.boot_devel(facts(EL9, K9, K9, {K9: True})) == {
        'family': 'el', 'release': K9, 'needed': False, 'package': distro_devel(K9)}
    assert K.boot_devel(facts(UBUNTU, U_GA, U_HWE, {}, UBUNTU_GA)) == {
        'family': 'debian', 'release': U_HWE, 'needed': True, 'package': 'linux-headers-' + U_HWE}
    assert K.boot_devel(facts(SUSE, '6.4.0-150600', None, {})) is None


@pytest.mark.parametrize('given, allowed', [
    ({'nodeprep_reboot_ok': 'false'}, False),
    ({'nodeprep_reboot_ok': 'true'}, True),
    ({'nodeprep_kernel_reboot_ok': 'false'}, False),
    # The role's defaults/main.yml templated with -e nodeprep_reboot_ok=false.
    ({'nodeprep_reboot_ok': 'false', 'nodeprep_kernel_reboot_ok': 'false'}, False),
    ({'nodeprep_reboot_ok': 'true', 'nodeprep_kernel_reboot_ok': 'false'}, False),
    ({'nodeprep_reboot_ok': 'false', 'nodeprep_kernel_reboot_ok': 'yes'}, True),
    ({}, False),
])
def test_a_reboot_only_when_allowed(given, allowed):
    plan = make_plan(facts(EL9, K9, K9_NEW, {K9_NEW: True}, {'kernel-core': [K9, K9_NEW]}), given)
    assert plan['problems'] == []
    assert plan['reboot'] == {'needed': True, 'allowed': allowed, 'timeout': 1800, 'before': [],
                              'why': ['kernel: running 5.14.0-570.el9.x86_64, the kernel that boots next is '
                                      '5.14.0-611.el9.x86_64']}
    assert plan['args']['kernel']['reboot_ok'] is allowed


def test_every_bool_setting_given_as_text_false_is_false():
    names = sorted(n for n, spec in K.SETTINGS.items() if spec['type'] == 'bool')
    settings, problems = _plans.typed_settings('kernel', dict((n, 'false') for n in names))
    assert problems == []
    assert dict((n, settings[n]) for n in names) == dict((n, False) for n in names)
    assert K.reboot_ok(settings) is False


def test_elrepo_repository_of_the_plan():
    given = {'nodeprep_kernel_source': 'elrepo-ml', 'nodeprep_kernel_elrepo_gpgkey': 'http://a/k1,http://a/k2'}
    plan = make_plan(facts(EL10, K10, K10, {K10: True}, {'kernel-core': [K10]}), given)
    assert plan['settings']['nodeprep_kernel_elrepo_gpgkey'] == ['http://a/k1', 'http://a/k2']
    assert plan['args']['kernel']['elrepo'] == {
        'name': 'elrepo-kernel', 'baseurl': 'https://elrepo.org/linux/kernel/el10/x86_64/', 'gpgcheck': True,
        'description': 'ELRepo.org Community Enterprise Linux Kernel Repository - el10',
        'gpgkey': ['http://a/k1', 'http://a/k2']}
    mirror = make_plan(facts(EL9, K9, K9, {K9: True}), {
        'nodeprep_kernel_source': 'elrepo-lt', 'nodeprep_kernel_elrepo_url': 'http://mirror/el9/',
        'nodeprep_kernel_elrepo_gpgcheck': 'no'})
    assert mirror['args']['kernel']['elrepo']['baseurl'] == 'http://mirror/el9/'
    assert mirror['args']['kernel']['elrepo']['gpgkey'] is None
    default_keys = make_plan(facts(EL9, K9, K9, {K9: True}), {'nodeprep_kernel_source': 'elrepo-lt'})
    assert default_keys['args']['kernel']['elrepo']['gpgkey'] == [
        'https://www.elrepo.org/RPM-GPG-KEY-elrepo.org', 'https://www.elrepo.org/RPM-GPG-KEY-v2-elrepo.org']
    assert make_plan(facts(EL9, K9, K9, {K9: True}))['args']['kernel']['elrepo'] is None


@pytest.mark.parametrize('major, keys, base, expected', [
    ('9', None, '', ['https://www.elrepo.org/RPM-GPG-KEY-elrepo.org',
                     'https://www.elrepo.org/RPM-GPG-KEY-v2-elrepo.org']),
    ('10', None, '', ['https://www.elrepo.org/RPM-GPG-KEY-v2-elrepo.org']),
    ('10', None, 'file:///srv/elrepo/', ['file:///srv/elrepo/RPM-GPG-KEY-v2-elrepo.org']),
    # EL 10's rpm rejects the original key: a given list loses it there, keeps any other key.
    ('10', ['file:///k/RPM-GPG-KEY-elrepo.org', 'file:///k/RPM-GPG-KEY-v2-elrepo.org', 'http://x/mine.asc'], '',
     ['file:///k/RPM-GPG-KEY-v2-elrepo.org', 'http://x/mine.asc']),
    ('8', ['file:///k/RPM-GPG-KEY-elrepo.org'], '', ['file:///k/RPM-GPG-KEY-elrepo.org']),
])
def test_elrepo_gpgkeys(major, keys, base, expected):
    assert K.elrepo_gpgkeys(major, keys, base) == expected


def test_elrepo_gpgkeys_refuses_a_release_elrepo_does_not_serve():
    with pytest.raises(ValueError) as exc:
        K.elrepo_gpgkeys('7')
    assert str(exc.value) == "EL major version '7' is not one ELRepo publishes for; allowed: 8, 9, 10"


def test_an_unknown_source_is_a_problem():
    plan = make_plan(facts(EL9, K9, K9, {K9: True}), {'nodeprep_kernel_source': 'mainline'})
    assert len(plan['problems']) == 1 and plan['problems'][0].startswith('nodeprep_kernel_source="mainline": ')
    assert 'distro, hwe, elrepo-lt, elrepo-ml' in plan['problems'][0]
    assert plan['reasons'] == []
    assert _readiness.plan_check(K.CHECK, plan)['status'] == 'fail'


def test_os_facts_not_read_are_work_for_the_tasks():
    state = facts(EL9, K9, K9, {K9: True})
    del state['kernel_state']['os']
    plan = make_plan(state)
    assert plan['reasons'] == ['kernel facts to gather: the OS (the role reads it with the setup module)']
    assert plan['args']['kernel'] is None
    # The role's setup gives Ansible's own OS facts: the plan made from them decides.
    state.update(EL9)
    assert make_plan(state)['args']['kernel']['target'] == K9


def test_kernel_facts_not_gathered_are_missing():
    plan = make_plan({})
    assert plan['missing'] == ['subsets: kernel'] and plan['run'] == ['facts to gather: subsets: kernel']
    check = _readiness.plan_check(K.CHECK, plan)
    assert (check['status'], check['observed']) == ('fail', 'not gathered: subsets: kernel')


# --------------------------------------------------------------------------------------- idempotence

def applied(state, plan):
    """The node after the role's work as the plan says it (what dnf/apt, grubby and the reboot leave), when allowed
    to reboot: the target installed with its devel tree, booting next and running."""
    args = plan['args']['kernel']
    ks = dict(state['kernel_state'])
    target = args['target']
    packages = dict(ks['packages'])
    if args['pending']:
        target = {'kernel-ml': ML, 'kernel': K9_NEW, 'linux-generic-hwe-22.04': U_HWE}[args['install']['name'][0]]
        for name in args['install']['name']:
            packages[name] = packages.get(name, []) + [target if args['family'] == 'el' else '6.8.0.60.63']
        packages[args['install']['name'][0] + '-core'] = [target]
    devel = dict(ks['devel'])
    if args['devel']['needed'] or args['pending']:
        devel[target] = True
    ks.update(running=target, default=target, devel=devel, packages=packages)
    return dict(state, kernel_state=ks)


@pytest.mark.parametrize('name, state, given', [(c[0], c[1], c[2]) for c in DECISIONS],
                         ids=[case[0] for case in DECISIONS])
def test_planning_again_after_the_work_finds_nothing_to_do(name, state, given):
    plan = make_plan(state, given)
    after = make_plan(applied(state, plan), given)
    assert after['reasons'] == []
    assert after['drift'] == [] and after['reboot']['needed'] is False


# --------------------------------------------------------------------------------------- the stages of a run

def test_the_tasks_loop_over_the_plan_s_lists():
    plan = make_plan(facts(EL9, K9, K9, {K9: True}), {'nodeprep_kernel_source': 'elrepo-ml'})
    args = plan['args']['kernel']
    assert [r['name'] for r in args['repositories']] == ['elrepo-kernel']
    assert args['installs'] == [{'module': 'dnf', 'name': ['kernel-ml', 'kernel-ml-devel'],
                                 'enablerepo': 'elrepo-kernel'}]
    assert args['default'] == [['grubby', '--set-default=/boot/vmlinuz-(newest kernel-ml to be installed)']]
    assert args['predict'] == [] and plan['args']['run'] == {'stage': 'start',
                                                             'booting': '(newest kernel-ml to be installed)'}
    # Installed and booting: nothing to loop over, the repository is left alone.
    done = make_plan(facts(EL9, ML, ML, {ML: True}, dict(EL9_DISTRO, **{'kernel-ml': [ML], 'kernel-ml-core': [ML]})),
                     {'nodeprep_kernel_source': 'elrepo-ml'})['args']['kernel']
    assert (done['repositories'], done['installs'], done['default'], done['verify']) == ([], [], [], [])


@pytest.mark.parametrize('repos, predicted', [
    (None, True),
    ({}, True),
    ({'elrepo-kernel': {'baseurl': 'x', 'enabled': False, 'gpgcheck': True, 'gpgkey': None, 'file': 'f'}}, False),
])
def test_check_mode_predicts_an_install_from_a_repository_it_did_not_define(repos, predicted):
    state = facts(EL9, K9, K9, {K9: True})
    if repos is not None:
        state['kernel_state']['driver_node'] = {'repos': repos}
    args = make_plan(state, {'nodeprep_kernel_source': 'elrepo-ml'}, check_mode=True)['args']['kernel']
    assert args['predict'] == ([K.INSTALL_TASK] if predicted else [])
    assert bool(args['installs']) is not predicted
    # A real run installs.
    assert make_plan(state, {'nodeprep_kernel_source': 'elrepo-ml'})['args']['kernel']['installs']


def test_right_after_an_installation_grubby_sets_the_default_once():
    """Check mode cannot tell whether the new kernel's package made itself the default: both modes run grubby right
    after the installation, and the plans after that one do not."""
    state = facts(EL9, K9, ML, {K9: True, ML: True}, dict(EL9_DISTRO, **{'kernel-ml': [ML], 'kernel-ml-core': [ML]}))
    given = {'nodeprep_kernel_source': 'elrepo-ml'}
    assert make_plan(state, given)['args']['kernel']['default'] == []
    after = make_plan(state, given, run={'stage': 'installed'})
    assert after['args']['kernel']['default'] == [['grubby', '--set-default=/boot/vmlinuz-' + ML]]
    assert after['args']['run'] == {'stage': 'start', 'booting': ML}


def test_a_failed_dkms_build_stops_the_node_with_what_it_said():
    state = ml_facts(ML10, DKMS_NOW, {'nvidia-open/580.95.05': FAILED_LOG})
    given = {'nodeprep_kernel_source': 'elrepo-ml', 'nodeprep_reboot_ok': True}
    assert make_plan(state, given)['errors'] == [] and make_plan(state, given)['args']['kernel']['restore'] == []
    build = {'cmd': ['dkms', 'install', 'nvidia-open/580.95.05', '-k', ML10], 'rc': 11,
             'stdout_lines': ['Building module:', 'Error! Bad return status for module build on kernel: ' + ML10],
             'stderr_lines': []}
    plan = make_plan(state, given, run={'stage': 'dkms', 'dkms': [build]})
    assert len(plan['errors']) == 1
    assert plan['errors'][0].startswith('kernel on node1: the NVIDIA driver is not built for ' + ML10)
    assert plan['errors'][0].endswith('dkms install nvidia-open/580.95.05 -k {0} exited 11: Building module: | Error! '
                                      'Bad return status for module build on kernel: {0}'.format(ML10))
    assert plan['args']['kernel']['restore'] == [['grubby', '--set-default=/boot/vmlinuz-' + K10]]


def test_a_reboot_that_did_not_bring_the_kernel_is_an_error():
    state = facts(EL9, K9, K9_NEW, {K9_NEW: True}, {'kernel-core': [K9, K9_NEW]})
    plan = make_plan(state, run={'stage': 'rebooted', 'booting': K9_NEW})
    assert plan['errors'] == ['The node rebooted but runs {0}, not {1} (the boot loader\'s default is now {1}).'.format(
        K9, K9_NEW)]
    assert make_plan(facts(EL9, K9_NEW, K9_NEW, {K9_NEW: True}, {'kernel-core': [K9, K9_NEW]}),
                     run={'stage': 'rebooted', 'booting': K9_NEW})['errors'] == []


def test_a_stage_the_plan_does_not_know_is_named():
    with pytest.raises(ValueError) as exc:
        K.run_state({'stage': 'booted'})
    assert str(exc.value) == "run.stage='booted': allowed start, installed, dkms, rebooted"


# --------------------------------------------------------------------------------------- readiness agreement

def test_devel_check_names_the_release_and_the_package():
    plan = make_plan(facts(UBUNTU, '6.9.0-custom', '6.9.0-custom', {U_GA: True}, UBUNTU_GA))
    check = _readiness.plan_check(K.CHECK, plan)
    assert (check['status'], check['expected'], check['observed']) == (
        'fail', 'devel/headers installed for the kernel that boots next, 6.9.0-custom',
        'devel: /lib/modules/6.9.0-custom/build does not resolve: linux-headers-6.9.0-custom is not installed')


def test_devel_check_not_managed():
    plan = make_plan(facts(EL9, K9, K9, {}), {'nodeprep_kernel_manage_devel': False})
    check = _readiness.plan_check(K.CHECK, plan)
    assert (check['status'], check['expected'], check['observed']) == (
        'skip', 'not managed (nodeprep_kernel_manage_devel is false)',
        'nodeprep_kernel_manage_devel is false: the role leaves the devel/headers trees alone')


# --------------------------------------------------------------------------------------- iommu=pt (opt-in)

def with_boot(state, cmdline, boot_args):
    state['kernel_state']['rdma'] = {'cmdline': cmdline, 'boot_args': boot_args, 'connectx': []}
    return state


IOMMU = [
    ('EL: grubby adds it, then a reboot', EL9, K9, 'BOOT_IMAGE=(hd0,gpt2)/vmlinuz ro',
     {'bls': {'m-' + K9 + '.conf': 'root=/dev/sda ro'}},
     ['iommu=pt: missing from the boot entries m-{0}.conf'.format(K9),
      'kernel: iommu=pt is not on the running kernel command line (/proc/cmdline)'],
     ['grubby', '--update-kernel=ALL', '--args=iommu=pt'], None, True),
    ('EL: set, not booted yet: the reboot only', EL9, K9, 'ro', {'bls': {'m.conf': 'ro iommu=pt'}},
     ['kernel: iommu=pt is not on the running kernel command line (/proc/cmdline)'], None, None, True),
    ('EL: set and booted: nothing', EL9, K9, 'ro iommu=pt', {'bls': {'m.conf': 'ro iommu=pt'}}, [], None, None, False),
    ('Ubuntu: /etc/default/grub', UBUNTU, U_GA, 'quiet',
     {'bls': {}, 'grub_cmdline_linux': '', 'grub_cmdline_linux_default': 'quiet splash'},
     ['iommu=pt: missing from GRUB_CMDLINE_LINUX in /etc/default/grub',
      'kernel: iommu=pt is not on the running kernel command line (/proc/cmdline)'],
     None, 'GRUB_CMDLINE_LINUX="iommu=pt"', True),
]


def _iommu_state(case):
    name, os_info, running, cmdline, boot = case[:5]
    packages = EL9_DISTRO if os_info is EL9 else UBUNTU_GA
    return with_boot(facts(os_info, running, running, {running: True}, packages), cmdline, boot)


@pytest.mark.parametrize('name, os_info, running, cmdline, boot, reasons, grubby, line, reboot', IOMMU)
def test_iommu_passthrough_table(name, os_info, running, cmdline, boot, reasons, grubby, line, reboot):
    state = _iommu_state((name, os_info, running, cmdline, boot))
    plan = make_plan(state, {'nodeprep_kernel_iommu_passthrough': True})
    assert plan['errors'] == [], name
    assert plan['reasons'] == reasons, name
    iommu = plan['args']['kernel']['iommu']
    assert (iommu['grubby'], iommu['grub_line'], plan['reboot']['needed']) == (grubby, line, reboot), name
    assert plan['reboot']['allowed'] is False  # never a reboot unless allowed


def test_iommu_passthrough_off_by_default():
    state = with_boot(facts(EL9, K9, K9, {K9: True}), 'ro', {'bls': {'m.conf': 'ro'}})
    plan = make_plan(state)
    assert plan['args']['kernel']['iommu'] is None
    assert plan['reasons'] == []


# --------------------------------------------------------------------------------------- NVIDIA DKMS before a reboot (R24)

ML10 = '6.16.7-1.el10.elrepo.x86_64'
DKMS_NOW = [{'module': 'nvidia-open', 'version': '580.95.05', 'kernel': K10, 'arch': 'x86_64', 'status': 'installed',
             'detail': 'installed'}]
DKMS_BOTH = DKMS_NOW + [dict(DKMS_NOW[0], kernel=ML10)]
FAILED_LOG = ('DKMS (dkms-3.2.2) make.log for nvidia-open/580.95.05 for kernel {0} (x86_64)\n'
              'make[1]: *** [Makefile:89: modules] Error 2\n'.format(ML10))


def ml_facts(default, dkms, logs=None):
    packages = {'kernel-core': [K10], 'kernel-ml': [ML10], 'kernel-ml-core': [ML10]}
    state = facts(EL10, K10, default, {K10: True, ML10: True}, packages)
    state['kernel_state'].update(dkms=dkms, dkms_logs=logs or {})
    return state


DKMS = [
    ('the driver works and is not built for the kernel that boots next: built first',
     ml_facts(ML10, DKMS_NOW), ['nvidia-open/580.95.05'], [], True,
     'dkms: nvidia-open/580.95.05 not built for ' + ML10 + '; built before the node may boot it'),
    ('built for both: nothing to build',
     ml_facts(ML10, DKMS_BOTH), [], [], True, None),
    ('the build for the target failed: its make.log is read',
     ml_facts(ML10, DKMS_NOW, {'nvidia-open/580.95.05': FAILED_LOG}), ['nvidia-open/580.95.05'],
     ['nvidia-open/580.95.05'], True, 'dkms: nvidia-open/580.95.05 not built for ' + ML10),
    ('default back on the running kernel: nothing to restore',
     ml_facts(K10, DKMS_NOW), ['nvidia-open/580.95.05'], [], False, 'dkms: nvidia-open/580.95.05 not built'),
    ('no driver installed: nothing to build',
     ml_facts(ML10, []), [], [], True, None),
]


@pytest.mark.parametrize('name, state, missing, failed, restore, reason', DKMS,
                         ids=lambda value: value if isinstance(value, str) and ' ' in value and len(value) > 30 else None)
def test_nvidia_dkms_built_before_the_reboot(name, state, missing, failed, restore, reason):
    plan = make_plan(state, {'nodeprep_kernel_source': 'elrepo-ml', 'nodeprep_reboot_ok': True})
    dkms = plan['args']['kernel']['dkms']
    assert plan['args']['kernel']['target'] == ML10
    assert dkms['missing'] == missing and list(dkms['failed']) == failed
    assert dkms['build'] == [['dkms', 'install', name_, '-k', ML10] for name_ in missing]
    assert dkms['restore_default'] is restore and dkms['fallback_path'] == '/boot/vmlinuz-' + K10
    if reason:
        assert [r for r in plan['reasons'] if r.startswith(reason)]
        assert dkms['error'].startswith('kernel on node1: the NVIDIA driver is not built for ' + ML10)
        assert ('make[1]: *** [Makefile:89: modules] Error 2' in dkms['error']) is bool(failed)
    else:
        assert not [r for r in plan['reasons'] if r.startswith('dkms:')] and dkms['error'] == ''


def test_nvidia_dkms_nothing_to_build_when_the_running_kernel_boots_next():
    plan = make_plan(ml_facts(K10, DKMS_NOW), {})
    assert plan['args']['kernel']['target'] == K10
    assert plan['args']['kernel']['dkms']['missing'] == [] and plan['reasons'] == []


# --------------------------------------------------------------------------------------- the stages of a run

def test_the_tasks_loop_over_the_plan_s_lists():
    plan = make_plan(facts(EL9, K9, K9, {K9: True}), {'nodeprep_kernel_source': 'elrepo-ml'})
    args = plan['args']['kernel']
    assert [r['name'] for r in args['repositories']] == ['elrepo-kernel']
    assert args['installs'] == [{'module': 'dnf', 'name': ['kernel-ml', 'kernel-ml-devel'],
                                 'enablerepo': 'elrepo-kernel'}]
    assert args['default'] == [['grubby', '--set-default=/boot/vmlinuz-(newest kernel-ml to be installed)']]
    assert args['predict'] == [] and plan['args']['run'] == {'stage': 'start',
                                                             'booting': '(newest kernel-ml to be installed)'}
    # Installed and booting: nothing to loop over, the repository is left alone.
    done = make_plan(facts(EL9, ML, ML, {ML: True}, dict(EL9_DISTRO, **{'kernel-ml': [ML], 'kernel-ml-core': [ML]})),
                     {'nodeprep_kernel_source': 'elrepo-ml'})['args']['kernel']
    assert (done['repositories'], done['installs'], done['default'], done['verify']) == ([], [], [], [])


@pytest.mark.parametrize('repos, predicted', [
    (None, True),
    ({}, True),
    ({'elrepo-kernel': {'baseurl': 'x', 'enabled': False, 'gpgcheck': True, 'gpgkey': None, 'file': 'f'}}, False),
])
def test_check_mode_predicts_an_install_from_a_repository_it_did_not_define(repos, predicted):
    state = facts(EL9, K9, K9, {K9: True})
    if repos is not None:
        state['kernel_state']['driver_node'] = {'repos': repos}
    args = make_plan(state, {'nodeprep_kernel_source': 'elrepo-ml'}, check_mode=True)['args']['kernel']
    assert args['predict'] == ([K.INSTALL_TASK] if predicted else [])
    assert bool(args['installs']) is not predicted
    # A real run installs.
    assert make_plan(state, {'nodeprep_kernel_source': 'elrepo-ml'})['args']['kernel']['installs']


def test_right_after_an_installation_grubby_sets_the_default_once():
    """Check mode cannot tell whether the new kernel's package made itself the default: both modes run grubby right
    after the installation, and the plans after that one do not."""
    state = facts(EL9, K9, ML, {K9: True, ML: True}, dict(EL9_DISTRO, **{'kernel-ml': [ML], 'kernel-ml-core': [ML]}))
    given = {'nodeprep_kernel_source': 'elrepo-ml'}
    assert make_plan(state, given)['args']['kernel']['default'] == []
    after = make_plan(state, given, run={'stage': 'installed'})
    assert after['args']['kernel']['default'] == [['grubby', '--set-default=/boot/vmlinuz-' + ML]]
    assert after['args']['run'] == {'stage': 'start', 'booting': ML}


def test_a_failed_dkms_build_stops_the_node_with_what_it_said():
    state = ml_facts(ML10, DKMS_NOW, {'nvidia-open/580.95.05': FAILED_LOG})
    given = {'nodeprep_kernel_source': 'elrepo-ml', 'nodeprep_reboot_ok': True}
    assert make_plan(state, given)['errors'] == [] and make_plan(state, given)['args']['kernel']['restore'] == []
    build = {'cmd': ['dkms', 'install', 'nvidia-open/580.95.05', '-k', ML10], 'rc': 11,
             'stdout_lines': ['Building module:', 'Error! Bad return status for module build on kernel: ' + ML10],
             'stderr_lines': []}
    plan = make_plan(state, given, run={'stage': 'dkms', 'dkms': [build]})
    assert len(plan['errors']) == 1
    assert plan['errors'][0].startswith('kernel on node1: the NVIDIA driver is not built for ' + ML10)
    assert plan['errors'][0].endswith('dkms install nvidia-open/580.95.05 -k {0} exited 11: Building module: | Error! '
                                      'Bad return status for module build on kernel: {0}'.format(ML10))
    assert plan['args']['kernel']['restore'] == [['grubby', '--set-default=/boot/vmlinuz-' + K10]]


def test_a_reboot_that_did_not_bring_the_kernel_is_an_error():
    state = facts(EL9, K9, K9_NEW, {K9_NEW: True}, {'kernel-core': [K9, K9_NEW]})
    plan = make_plan(state, run={'stage': 'rebooted', 'booting': K9_NEW})
    assert plan['errors'] == ['The node rebooted but runs {0}, not {1} (the boot loader\'s default is now {1}).'.format(
        K9, K9_NEW)]
    assert make_plan(facts(EL9, K9_NEW, K9_NEW, {K9_NEW: True}, {'kernel-core': [K9, K9_NEW]}),
                     run={'stage': 'rebooted', 'booting': K9_NEW})['errors'] == []


def test_a_stage_the_plan_does_not_know_is_named():
    with pytest.raises(ValueError) as exc:
        K.run_state({'stage': 'booted'})
    assert str(exc.value) == "run.stage='booted': allowed start, installed, dkms, rebooted"


# --------------------------------------------------------------------------------------- readiness agreement

def _agreement_rows():
    rows = [(c[0], c[1], c[2]) for c in DECISIONS + REFUSALS]
    for case in IOMMU:
        rows.append(('iommu: ' + case[0], _iommu_state(case), {'nodeprep_kernel_iommu_passthrough': True}))
    for case in DKMS:
        rows.append(('dkms: ' + case[0], case[1], {'nodeprep_kernel_source': 'elrepo-ml', 'nodeprep_reboot_ok': True}))
    rows.append(('the OS not known', _no_os(), {}))
    rows.append(('devel not managed, a reboot pending', facts(EL9, K9, K9_NEW, {}, {'kernel-core': [K9, K9_NEW]}),
                 {'nodeprep_kernel_manage_devel': False}))
    return rows


def _no_os():
    state = facts(EL9, K9, K9, {K9: True})
    del state['kernel_state']['os']
    return state


@pytest.mark.parametrize('name, state, given', _agreement_rows(), ids=[row[0] for row in _agreement_rows()])
def test_the_check_agrees_with_the_plan(name, state, given):
    """The agreement table of the kernel plan (issue 27): kernel.devel_matched passes (or does not apply) exactly
    when the plan has no drift; it fails exactly when the plan refuses the node (errors, problems) or has fail-level
    drift; every piece of the role's work is fixable drift of it (the reasons are exactly the fixable drift)."""
    if state['kernel_state'].get('packages') is False:
        state = dict(state, kernel_state=dict(state['kernel_state'], packages=None))
    plan = make_plan(state, given)
    check = _readiness.plan_check(K.CHECK, plan)
    drift = plan['drift']
    refuses = bool(plan['errors'] or plan['problems'])
    assert plan['reasons'] == [item['msg'] for item in drift if item['fixable']], name
    assert (check['status'] in ('pass', 'skip')) == (drift == [] and not refuses), name
    assert (check['status'] == 'fail') == (refuses or any(item['level'] == 'fail' for item in drift)), name
    for reason in plan['reasons']:
        assert reason in check['observed'], (name, reason)
    if plan['errors']:
        assert not plan['reasons']
        assert (check['status'], check['observed']) == ('fail', 'the kernel role cannot run here: ' + plan['errors'][0])
    devel_reasons = [r for r in plan['reasons'] if r.startswith('devel: ')]
    if not plan['settings']['nodeprep_kernel_manage_devel']:
        assert devel_reasons == [] and check['expected'].startswith('not managed')
        assert (check['status'] == 'skip') == (drift == [])
    elif not refuses and not plan['reasons'] and plan['args']['kernel'] is not None:
        target = plan['args']['kernel']['target']
        assert check['observed'] == 'devel/headers present for {0} (/lib/modules/{0}/build)'.format(target)
        assert check['expected'] == 'devel/headers installed for the kernel that boots next, ' + target


# --------------------------------------------------------------------------------------- what stops a reboot outright

UBUNTU24 = dict(UBUNTU, distribution_version='24.04', distribution_major_version='24')
U_RUN = '6.8.0-60-generic'
U_NEW = '6.8.0-62-generic'
SIGNED = 'linux-modules-nvidia-580-server-open-'


def records(**versions):
    """The gather's package records (driver_node.packages) of name=version."""
    return dict((name.replace('_', '-'), [{'epoch': None, 'version': version, 'release': None, 'arch': 'amd64'}])
                for name, version in versions.items())


def signed_facts(candidates, installed_next=False, stage_packages=None):
    """An Ubuntu 24.04 node on Ubuntu's signed driver (R25) whose kernel meta package brought U_NEW, booting next;
    ``candidates``: the gather's apt candidates (None: not read)."""
    packages = {'nvidia-headless-no-dkms-580-server-open': [{'version': '580.95.05-0ubuntu0.24.04.2'}],
                SIGNED + U_RUN: [{'version': '6.8.0-60.63+1'}], SIGNED + 'generic': [{'version': '6.8.0-60.63+1'}]}
    if installed_next:
        packages[SIGNED + U_NEW] = [{'version': '6.8.0-62.65+1'}]
    packages.update(stage_packages or {})
    state = facts(UBUNTU24, U_RUN, U_NEW, {U_RUN: True, U_NEW: True},
                  {'linux-image-generic': ['6.8.0-62.65'], 'linux-image-' + U_RUN: ['6.8.0-60.63'],
                   'linux-image-' + U_NEW: ['6.8.0-62.65']})
    state['kernel_state'].update(
        nvidia_module={'loaded': True, 'version': '580.95.05', 'flavour': 'open'}, dkms=[], dkms_tree=[],
        dkms_status={'ran': False, 'missing': True},
        driver_node={'packages': packages, 'apt_candidates': candidates})
    return state


REBOOT_OK = {'nodeprep_reboot_ok': True}


def test_ubuntu_signed_modules_of_the_next_kernel_installed_before_the_reboot():
    plan = make_plan(signed_facts({SIGNED + U_NEW: '6.8.0-62.65+1', SIGNED + U_RUN: '6.8.0-60.63+1'}), REBOOT_OK)
    modules = plan['args']['kernel']['modules']
    assert (modules['install'], modules['transactions'], modules['unavailable']) == (
        [SIGNED + U_NEW], [[SIGNED + U_NEW]], [])
    assert plan['args']['kernel']['stop'] == [] and plan['reboot']['allowed'] is True
    assert "modules: Ubuntu's signed {0}{1} not installed for {1}; installed before the node may boot it".format(
        SIGNED, U_NEW) in plan['reasons']
    # Candidates not read (apt-cache could not run): the installation is tried and read back.
    assert make_plan(signed_facts(None), REBOOT_OK)['args']['kernel']['modules']['install'] == [SIGNED + U_NEW]
    # Installed: nothing in the way of the reboot.
    done = make_plan(signed_facts({}, installed_next=True), REBOOT_OK)
    assert done['args']['kernel']['modules']['needed'] == [SIGNED + U_NEW]
    assert done['args']['kernel']['modules']['install'] == [] and done['reboot']['allowed'] is True


def test_ubuntu_next_kernel_without_signed_modules_is_not_rebooted_into():
    """The kernel meta package brought a kernel whose linux-modules-nvidia-* package is in no apt list: the node
    would come back without GPUs, so the reboot stops (before: the plan rebooted, it only checked DKMS)."""
    for mode in (False, True):
        plan = make_plan(signed_facts({SIGNED + U_NEW: None, SIGNED + U_RUN: '6.8.0-60.63+1'}), REBOOT_OK,
                         check_mode=mode)
        kernel = plan['args']['kernel']
        assert kernel['modules']['unavailable'] == [SIGNED + U_NEW] and kernel['modules']['transactions'] == []
        assert len(kernel['stop']) == 1 and plan['reboot']['allowed'] is False and plan['reboot']['needed'] is True
        msg = kernel['stop'][0]
        for part in ("kernel on node1: Ubuntu's Canonical-signed NVIDIA modules are not installed for " + U_NEW,
                     SIGNED + U_NEW + ': no installation candidate in the apt lists (apt-cache policy)',
                     'it is not rebooted (the boot loader still boots {0} next)'.format(U_NEW), 'keep ' + U_RUN):
            assert part in msg, part
        check = _readiness.plan_check(K.CHECK, plan)
        assert check['status'] == 'fail' and msg in check['observed']


def test_ubuntu_modules_installation_that_did_not_bring_them_stops_the_node():
    facts_ = signed_facts({SIGNED + U_NEW: '6.8.0-62.65+1'})
    plan = make_plan(facts_, REBOOT_OK, run={'stage': 'dkms'})
    assert len(plan['errors']) == 1 and 'the installation did not bring it' in plan['errors'][0]


STALE = [{'module': 'nvidia-open', 'version': '570.86.15', 'source': False},
         {'module': 'nvidia-open', 'version': '580.95.05', 'source': True}]


def stale_facts(default, status=None):
    """EL 10 on NVIDIA's DKMS driver, kernel-ml installed; dkms status lists nothing (a stale tree sorts first)."""
    state = ml_facts(default, [])
    state['kernel_state'].update(
        nvidia_module={'loaded': True, 'version': '580.95.05', 'flavour': 'open'}, dkms_tree=STALE,
        dkms_status=status or {'ran': True, 'rc': 0, 'stderr': 'Error! Could not locate dkms.conf file.\nFile: '
                               '/var/lib/dkms/nvidia-open/570.86.15/source/dkms.conf does not exist.', 'problems': []},
        driver_node={'packages': {'kmod-nvidia-open-dkms': [{'epoch': '3', 'version': '580.95.05',
                                                             'release': '1.el10', 'arch': 'x86_64'}]}})
    return state


GIVEN_ML = {'nodeprep_kernel_source': 'elrepo-ml', 'nodeprep_reboot_ok': True}


@pytest.mark.parametrize('default, restore', [(ML10, True), (K10, False)])
def test_an_unknown_dkms_state_stops_the_reboot(default, restore):
    """dkms status lists nothing while the node has NVIDIA's DKMS driver (dkms-project/dkms#352): before, nothing was
    'needed' and the node rebooted into kernel-ml without its GPUs."""
    plan = make_plan(stale_facts(default), GIVEN_ML)
    kernel = plan['args']['kernel']
    assert kernel['dkms']['missing'] == [] and len(kernel['stop']) == 1
    assert plan['reboot']['allowed'] is False
    # The target is not made the default boot entry; where it already is, the running kernel becomes it again.
    assert kernel['default'] == [] and kernel['set_default'] is False
    assert kernel['restore'] == ([['grubby', '--set-default=/boot/vmlinuz-' + K10]] if restore else [])
    msg = kernel['stop'][0]
    for part in ('kernel on node1: dkms status lists no NVIDIA module although /var/lib/dkms holds '
                 'nvidia-open/570.86.15 (its source link does not resolve',
                 'DKMS driver packages are installed (kmod-nvidia-open-dkms)',
                 'it printed on stderr: Error! Could not locate dkms.conf file.',
                 'Whether the NVIDIA driver is built for ' + ML10, K10 + ' stays the default boot entry'):
        assert part in msg, part
    check = _readiness.plan_check(K.CHECK, plan)
    assert check['status'] == 'fail' and msg in check['observed']


def test_an_unknown_dkms_state_is_no_matter_without_another_kernel():
    plan = make_plan(stale_facts(K10), {})
    assert plan['args']['kernel']['stop'] == [] and plan['reasons'] == []


def test_check_mode_predicts_the_stop_before_the_kernel_is_installed():
    state = stale_facts(K10)
    state['kernel_state']['packages'] = {'kernel-core': [K10]}
    plan = make_plan(state, GIVEN_ML, check_mode=True)
    kernel = plan['args']['kernel']
    assert kernel['pending'] and len(kernel['stop']) == 1 and plan['reboot']['allowed'] is False
    assert kernel['restore'] == [['grubby', '--set-default=/boot/vmlinuz-' + K10]] and kernel['default'] == []


STOP_ROWS = [
    ('stop: a stale DKMS tree, kernel-ml boots next', stale_facts(ML10), GIVEN_ML),
    ('stop: a stale DKMS tree, kernel-ml installed', stale_facts(K10), GIVEN_ML),
    ("stop: Ubuntu's signed modules in no apt list", signed_facts({SIGNED + U_NEW: None}), REBOOT_OK),
    ("Ubuntu's signed modules to install first", signed_facts({SIGNED + U_NEW: '6.8.0-62.65+1'}), REBOOT_OK),
]


@pytest.mark.parametrize('name, state, given', STOP_ROWS, ids=[row[0] for row in STOP_ROWS])
def test_the_check_agrees_with_the_plan_where_a_reboot_stops(name, state, given):
    test_the_check_agrees_with_the_plan(name, state, given)
