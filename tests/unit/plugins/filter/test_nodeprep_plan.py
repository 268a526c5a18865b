# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.filter.nodeprep_plan import (
    FilterModule, kernel_work_filter, nodeprep_os_facts, nvidia_driver_plan, nvidia_driver_work)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _driver_plan as P
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.test__driver_plan import (
    UNITS_RIGHT, WORK_SETTINGS, el_node_with, running_on, settings)


def test_registered():
    filters = FilterModule().filters()
    assert filters['nvidia_driver_plan'] is nvidia_driver_plan
    assert filters['nvidia_driver_work'] is nvidia_driver_work
    assert filters['kernel_work'] is kernel_work_filter
    assert filters['nodeprep_os_facts'] is nodeprep_os_facts


def _facts():
    facts = running_on('580.95.05')
    facts.pop('services')
    facts['units'] = UNITS_RIGHT
    facts['kernel_state']['driver_node'] = el_node_with('580.95.05')
    return facts


def test_plan_on_the_controller_is_the_module_plan():
    facts = _facts()
    node = facts['kernel_state']['driver_node']
    for check_mode in (False, True):
        assert nvidia_driver_plan(facts, settings(), check_mode=check_mode) == P.driver_plan(
            facts, settings(), node=node, check_mode=check_mode)


def test_converged_node_has_no_work_through_the_filters():
    facts = _facts()
    plan = nvidia_driver_plan(facts, settings())
    assert nvidia_driver_work(plan, facts, WORK_SETTINGS, UNITS_RIGHT, {}) == []
    assert nvidia_driver_work(plan, facts, WORK_SETTINGS, None, None) != []


def test_plan_without_the_node_state_says_to_use_the_module():
    facts = _facts()
    del facts['kernel_state']['driver_node']
    with pytest.raises(AnsibleFilterError, match='use the gpufleet.nodeprep.nvidia_driver_plan module'):
        nvidia_driver_plan(facts, settings())


@pytest.mark.parametrize('call, message', [
    (lambda: nvidia_driver_plan([], {}), 'the input'),
    (lambda: nvidia_driver_work({}, [], {}), 'facts must be a dict'),
    (lambda: kernel_work_filter('x', {}), 'ansible_facts.kernel_state'),
])
def test_bad_input(call, message):
    with pytest.raises(AnsibleFilterError, match=message):
        call()


def test_kernel_work_through_the_filter():
    state = {'running': 'r', 'default': 'r', 'devel': {'r': True}}
    assert kernel_work_filter(state, {'source': 'distro', 'family': 'el'}) == []
    assert kernel_work_filter(dict(state, devel={}), {'source': 'distro', 'family': 'el'}) == [
        'devel: /lib/modules/r/build does not resolve']


GATHERED_OS = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
               'distribution_major_version': '9', 'architecture': 'x86_64'}


def test_os_facts_prefer_ansibles_own():
    facts = {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_version': '24.04',
             'distribution_major_version': '24', 'architecture': 'x86_64', 'kernel': '6.8.0-60-generic',
             'kernel_state': {'os': GATHERED_OS}}
    assert nodeprep_os_facts(facts) == {'os_family': 'Debian', 'distribution': 'Ubuntu',
                                        'distribution_version': '24.04', 'distribution_major_version': '24',
                                        'architecture': 'x86_64'}


def test_os_facts_from_the_gather_without_setup():
    assert nodeprep_os_facts({'kernel_state': {'os': GATHERED_OS}, 'nvidia': {'gpus': [{}] * 8}}) == GATHERED_OS


def test_os_facts_leave_out_what_no_source_has():
    # Neither setup nor the gather read the OS: os_family stays undefined, so the roles run setup.
    assert nodeprep_os_facts({'kernel_state': {'os': None}, 'architecture': 'aarch64'}) == {'architecture': 'aarch64'}
    assert nodeprep_os_facts({}) == {}
    with pytest.raises(AnsibleFilterError):
        nodeprep_os_facts(['not', 'facts'])
