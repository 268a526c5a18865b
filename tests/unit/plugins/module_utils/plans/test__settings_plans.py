# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller-side plans of the settings roles agree with what the modules decide on the node (the gpu_settings
role's: test__plan_gpu_settings.py)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ethtool_fixture

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _nic_offload
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import parse_features

# ---------------------------------------------------------------- nic_offload

MLX = parse_features(ethtool_fixture('mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt'))
IF = 'enp1s0f0np0'


def nics(gro, nm_managed=None):
    features = dict((name, dict(value)) for name, value in MLX.items())
    features['generic-receive-offload']['enabled'] = gro
    return {IF: {'features': features, 'nm_managed': nm_managed}}


def test_offload_plan_sees_what_ethtool_would_change():
    entry = _nic_offload.offload_plan(nics(True), [IF], {'gro': False})[IF]
    assert entry['error'] is None
    assert dict(entry['changes']) == {'generic-receive-offload': {'before': True, 'after': False}}
    assert dict(entry['persistence']['nm_properties']) == {'ethtool.feature-gro': 'off'}


def test_offload_plan_nothing_to_change():
    entry = _nic_offload.offload_plan(nics(False, nm_managed=False), [IF], {'gro': False})[IF]
    assert dict(entry['changes']) == {}
    assert entry['persistence']['nm_managed'] is False


def test_offload_plan_errors_like_the_module():
    plan_ = _nic_offload.offload_plan(nics(False), [IF, 'eth9'], {'no-such-feature': False})
    assert plan_[IF]['error'].startswith("interface {0}: unknown feature 'no-such-feature'".format(IF))
    assert plan_['eth9']['error'] == 'interface eth9: its offload features were not gathered'


def test_unit_env_args_use_the_ethtool_names():
    persistence = {'nm_properties': {'ethtool.feature-gro': 'off', 'ethtool.feature-lro': 'off'},
                   'nm_unsupported': ['rx-gro-hw', 'rx-udp-gro-forwarding']}
    assert _nic_offload.unit_env_args(persistence, {'gro': False, 'lro': False, 'rx-gro-hw': True}) == [
        'gro', 'off', 'lro', 'off', 'rx-gro-hw', 'on']
