# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.filter.ethtool_features import FilterModule, ethtool_features

ETHTOOL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures', 'ethtool')


def fixture(name):
    with open(os.path.join(ETHTOOL_DIR, name)) as handle:
        return handle.read()


def test_registered():
    assert FilterModule().filters() == {'ethtool_features': ethtool_features}


@pytest.mark.parametrize('name, feature, expected', [
    ('loopback-lo_ethtool-k_hotsos.txt', 'generic-receive-offload', {'enabled': True, 'fixed': False}),
    ('loopback-lo_ethtool-k_hotsos.txt', 'tx-checksum-ipv4', {'enabled': False, 'fixed': True}),
    ('loopback-lo_ethtool-k_hotsos.txt', 'scatter-gather', {'enabled': True, 'fixed': True}),
    ('virtio_net-ens3_ethtool-k_hotsos.txt', 'rx-gro-hw', {'enabled': True, 'fixed': False}),
    ('virtio_net-ens3_ethtool-k_hotsos.txt', 'large-receive-offload', {'enabled': False, 'fixed': True}),
    # as copied from the blog, with its 8-space indent on every line
    ('mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt', 'macsec-hw-offload',
     {'enabled': True, 'fixed': False}),
    ('mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt', 'tx-checksum-ipv6',
     {'enabled': False, 'fixed': True}),
])
def test_ethtool_features_fixtures(name, feature, expected):
    result = ethtool_features(fixture(name))
    assert isinstance(result, dict)
    assert result[feature] == expected


def test_ethtool_features_requested_and_bytes():
    text = b'Features for veth0:\nrx-gro-hw: off [requested on]\nhighdma: on\n'
    assert ethtool_features(text) == {
        'rx-gro-hw': {'enabled': False, 'fixed': False, 'requested': True},
        'highdma': {'enabled': True, 'fixed': False},
    }


@pytest.mark.parametrize('data, message', [
    ('Cannot get device feature names: No such device',
     "ethtool_features: ethtool -k output line 1: cannot parse 'Cannot get device feature names: No such device'; "
     "expected 'name: on|off' optionally followed by [fixed], [requested on] or [requested off]"),
    ('', 'ethtool_features: ethtool -k output is empty'),
    (['gro: on'], 'ethtool_features: input must be the text ethtool -k prints (a string), not list'),
    (None, 'ethtool_features: input must be the text ethtool -k prints (a string), not NoneType'),
])
def test_ethtool_features_errors(data, message):
    with pytest.raises(AnsibleFilterError) as exc:
        ethtool_features(data)
    assert str(exc.value) == message
