# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.filter.nodeprep_plan import (
    FilterModule, kernel_work_filter, nvidia_driver_plan, nvidia_driver_work)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _driver_plan as P
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.test__driver_plan import (
    UNITS_RIGHT, WORK_SETTINGS, el_node_with, running_on, settings)


def test_registered():
    filters = FilterModule().filters()
    assert filters['nvidia_driver_plan'] is nvidia_driver_plan
    assert filters['nvidia_driver_work'] is nvidia_driver_work
    assert filters['kernel_work'] is kernel_work_filter


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
