# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/lookup/site_roles.py: site.yml's one list of roles, and its two stages."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

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


def test_an_unknown_stage_is_refused(lookup):
    with pytest.raises(AnsibleError, match="Invalid value 'late' for config 'stage'"):
        lookup.run([], {}, stage='late')
