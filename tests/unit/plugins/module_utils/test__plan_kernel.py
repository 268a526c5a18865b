# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel role's plan (plugins/module_utils/_plan_kernel.py): facts + settings -> plan, settings typed once
(``-e nodeprep_reboot_ok=false`` never allows a reboot), and its per-OS constants equal to roles/kernel/vars."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _plan_kernel as K
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


def facts(os_info, running, default=None, devel=None, packages=None):
    out = {'nodeprep_gathered': ['kernel'],
           'kernel_state': {'running': running, 'default': default, 'devel': devel or {}, 'os': dict(os_info)}}
    if packages is not None:
        out['nodeprep_packages'] = packages
    return out


def make_plan(ansible_facts, given=None):
    settings, problems = _plans.typed_settings('kernel', given or {})
    return _plans.plan_role('kernel', ansible_facts, settings, problems, _plan.new_context(host='node1'))


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


@pytest.mark.parametrize('name', sorted(K.OS_VARS))
def test_os_vars_are_the_role_vars_files(name):
    """roles/kernel/vars/<name>.yml (which the role's tasks load) and OS_VARS (which the plan reads) agree."""
    role_vars = _role_yaml('vars', name + '.yml')
    python = K.OS_VARS[name]
    assert role_vars['__nodeprep_kernel_family'] == python['family']
    assert role_vars['__nodeprep_kernel_sources'] == python['sources']

    def jinja_to_format(names):
        return [re.sub(r'\{\{ __nodeprep_kernel_os\.(\w+) \}\}', r'{\1}', n) for n in names]
    assert dict((k, jinja_to_format(v)) for k, v in role_vars['__nodeprep_kernel_image_packages'].items()) == \
        python['image_packages']
    assert role_vars.get('__nodeprep_kernel_devel_meta_packages') == python.get('devel_meta_packages')


def test_every_vars_file_of_the_role_has_its_constants():
    files = sorted(f[:-len('.yml')] for f in os.listdir(os.path.join(ROOT, 'roles', 'kernel', 'vars'))
                   if f != 'main.yml')
    assert files == sorted(K.OS_VARS)


@pytest.mark.parametrize('os_info, name', [(EL9, 'RedHat'), (EL10, 'RedHat'), (UBUNTU, 'Ubuntu'),
                                           (DEBIAN, 'Debian'), (SUSE, 'default')])
def test_os_vars_name_follows_the_first_found_chain(os_info, name):
    assert K.os_vars_name(os_info) == name


# --------------------------------------------------------------------------------------- facts + settings -> plan

@pytest.mark.parametrize('name, state, given, reasons, reboot', [
    ('EL9 distro kernel booting with its devel tree', facts(EL9, K9, K9, {K9: True}), {}, [], []),
    ('EL9 devel tree missing', facts(EL9, K9, K9, {}), {},
     ['devel: /lib/modules/5.14.0-570.el9.x86_64/build does not resolve'], []),
    ('EL9 devel tree missing, manage_devel false as text', facts(EL9, K9, K9, {}),
     {'nodeprep_kernel_manage_devel': 'false'}, [], []),
    ('EL9 a newer kernel boots next', facts(EL9, K9, K9_NEW, {K9_NEW: True}), {},
     ['reboot: running 5.14.0-570.el9.x86_64, 5.14.0-611.el9.x86_64 boots next'],
     ['kernel: running 5.14.0-570.el9.x86_64, the kernel that boots next is 5.14.0-611.el9.x86_64']),
    ('EL9 boot loader default unknown', facts(EL9, K9, None, {K9: True}), {},
     ['kernel: the boot loader default is unknown'], []),
    ('EL9 boot loader default unknown, set_default off as text', facts(EL9, K9, None, {K9: True}),
     {'nodeprep_kernel_set_default': 'no'}, [], []),
    ('EL9 an ELRepo kernel boots, distro wanted', facts(EL9, LT, LT, {LT: True}), {},
     ['kernel: 6.1.100-1.el9.elrepo.x86_64 (ELRepo) boots next, the distribution kernel is wanted'], []),
    ('EL9 ELRepo wanted: the tasks check the repository', facts(EL9, LT, LT, {LT: True}),
     {'nodeprep_kernel_source': 'elrepo-lt'},
     ['kernel source elrepo-lt: its repository and packages are checked by the tasks',
      'kernel: 6.1.100-1.el9.elrepo.x86_64 (ELRepo) boots next, the distribution kernel is wanted'], []),
    ('Ubuntu GA kernel with headers', facts(UBUNTU, U_GA, U_GA, {U_GA: True}, packages={}), {}, [], []),
    ('Ubuntu HWE wanted, its meta package not installed', facts(UBUNTU, U_GA, U_GA, {U_GA: True}, packages={}),
     {'nodeprep_kernel_source': 'hwe'},
     ['kernel source hwe: its repository and packages are checked by the tasks',
      'packages: linux-generic-hwe-22.04 not known to be installed'], []),
    ('Ubuntu HWE installed, boots next', facts(UBUNTU, U_GA, U_HWE, {U_HWE: True}), {},
     ['reboot: running 5.15.0-140-generic, 6.8.0-60-generic boots next'],
     ['kernel: running 5.15.0-140-generic, the kernel that boots next is 6.8.0-60-generic']),
    ('Debian without a boot loader default', facts(DEBIAN, '6.1.0-37-amd64', None, {'6.1.0-37-amd64': True}), {},
     [], []),
    ('an OS the role does not support', facts(SUSE, '6.4.0-150600', None, {}), {},
     ['platform: not supported (the tasks say why)'], []),
])
def test_plan_table(name, state, given, reasons, reboot):
    plan = make_plan(state, given)
    assert plan['problems'] == [] and plan['errors'] == [] and plan['missing'] == [], name
    assert plan['reasons'] == reasons, name
    assert plan['reboot'] == {'needed': bool(reboot), 'why': reboot, 'allowed': False}, name
    assert plan['run'] == reasons, name


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
    plan = make_plan(facts(EL9, K9, K9_NEW, {K9_NEW: True}), given)
    assert plan['problems'] == []
    assert plan['reboot']['allowed'] is allowed and plan['args']['kernel']['reboot_ok'] is allowed


def test_every_bool_setting_given_as_text_false_is_false():
    names = sorted(n for n, spec in K.SETTINGS.items() if spec['type'] == 'bool')
    settings, problems = _plans.typed_settings('kernel', dict((n, 'false') for n in names))
    assert problems == []
    assert dict((n, settings[n]) for n in names) == dict((n, False) for n in names)
    assert K.reboot_ok(settings) is False


def test_args_hold_what_the_tasks_read():
    given = {'nodeprep_kernel_source': 'elrepo-ml', 'nodeprep_kernel_elrepo_gpgkey': 'http://a/k1,http://a/k2'}
    plan = make_plan(facts(EL10, K9, K9, {K9: True}), given)
    assert plan['args']['kernel'] == {
        'family': 'el', 'sources': ['distro', 'elrepo-lt', 'elrepo-ml'],
        'work_settings': {'source': 'elrepo-ml', 'family': 'el', 'manage_devel': True, 'set_default': True,
                          'packages': ['kernel-ml', 'kernel-ml-core', 'kernel-ml-devel']},
        'elrepo_url': 'https://elrepo.org/linux/kernel/el10/x86_64/', 'reboot_ok': False}
    assert plan['settings']['nodeprep_kernel_elrepo_gpgkey'] == ['http://a/k1', 'http://a/k2']
    mirror = make_plan(facts(EL9, K9, K9, {K9: True}), {'nodeprep_kernel_elrepo_url': 'http://mirror/el9/'})
    assert mirror['args']['kernel']['elrepo_url'] == 'http://mirror/el9/'


def test_an_unknown_source_is_a_problem():
    plan = make_plan(facts(EL9, K9, K9, {K9: True}), {'nodeprep_kernel_source': 'mainline'})
    assert len(plan['problems']) == 1 and plan['problems'][0].startswith('nodeprep_kernel_source="mainline": ')
    assert 'distro, hwe, elrepo-lt, elrepo-ml' in plan['problems'][0]
    assert plan['reasons'] == []


def test_os_facts_not_read_are_work_for_the_tasks():
    state = facts(EL9, K9, K9, {K9: True})
    del state['kernel_state']['os']
    plan = make_plan(state)
    assert plan['reasons'] == ['kernel facts to gather'] and plan['args']['kernel'] is None


def test_kernel_facts_not_gathered_are_missing():
    plan = make_plan({})
    assert plan['missing'] == ['subsets: kernel'] and plan['run'] == ['facts to gather: subsets: kernel']


def test_idempotence_after_the_reboot_into_the_wanted_kernel():
    """The node after the role's work and its reboot: the kernel that booted is the one that boots next, with its
    devel tree: nothing left to do."""
    before = make_plan(facts(EL9, K9, K9_NEW, {}), {'nodeprep_reboot_ok': 'true'})
    assert before['reboot']['needed'] is True and before['reasons'] != []
    after = make_plan(facts(EL9, K9_NEW, K9_NEW, {K9_NEW: True}), {'nodeprep_reboot_ok': 'true'})
    assert after['reasons'] == [] and after['reboot'] == {'needed': False, 'why': [], 'allowed': True}
