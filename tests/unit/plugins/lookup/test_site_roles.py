# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/lookup/site_roles.py: site.yml's one list of roles, and its two stages."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

import pytest
import yaml

from ansible import constants as C
from ansible.errors import AnsibleError

from ansible_collections.gpufleet.nodeprep.plugins.lookup import site_roles

NAME = 'gpufleet.nodeprep.site_roles'


@pytest.fixture
def lookup():
    """The lookup with its options defined from its DOCUMENTATION, as Ansible's plugin loader defines them."""
    C.config.initialize_plugin_configuration_definitions(
        'lookup', NAME, yaml.safe_load(site_roles.DOCUMENTATION)['options'])
    plugin = site_roles.LookupModule()
    plugin._load_name = NAME
    return plugin


@pytest.mark.parametrize('kwargs, expected', [
    ({}, ['kernel', 'nvidia_driver', 'imex', 'gpu_settings', 'memlock', 'shm', 'nccl', 'nic_offload', 'rdma', 'dcgm',
          'perf_tools']),
    ({'stage': 'all'}, ['kernel', 'nvidia_driver', 'imex', 'gpu_settings', 'memlock', 'shm', 'nccl', 'nic_offload',
                        'rdma', 'dcgm', 'perf_tools']),
    ({'stage': 'disruptive'}, ['kernel', 'nvidia_driver']),
    ({'stage': 'settings'}, ['imex', 'gpu_settings', 'memlock', 'shm', 'nccl', 'nic_offload', 'rdma', 'dcgm',
                             'perf_tools']),
])
def test_the_roles_in_site_order(lookup, kwargs, expected):
    assert lookup.run([], {}, **kwargs) == expected


@pytest.mark.parametrize('stage', ['late', '', None, 1, 'Settings'])
def test_an_unknown_stage_is_refused_naming_the_value_and_the_allowed_ones(lookup, stage):
    # Written by hand: the three stages of site.yml (ansible-core 2.21 and 2.22 word their own choices error
    # differently and name no allowed value; the lookup refuses first).
    want = "stage={0!r} is not one of all, disruptive, settings".format(stage)
    with pytest.raises(AnsibleError, match=re.escape(want)):
        lookup.run([], {}, stage=stage)
