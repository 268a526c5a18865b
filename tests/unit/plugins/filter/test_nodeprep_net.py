# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.filter import nodeprep_net
from ansible_collections.gpufleet.nodeprep.plugins.filter.nodeprep_net import NicSelectError, select_nics


def _nic(driver, ipv4=(), ipv6=()):
    return {
        'mtu': 1500, 'speed_mbps': None,
        'addresses': {'ipv4': list(ipv4), 'ipv6': list(ipv6)},
        'driver': {'driver': driver, 'version': None, 'firmware_version': None, 'bus_info': None},
        'features': {}, 'nm_managed': None,
    }


NICS = {
    'lo': _nic(None, ['127.0.0.1/8'], ['::1/128']),
    'eno1': _nic('igb', ['192.168.1.10/24']),
    'ens1f0np0': _nic('mlx5_core', ['10.20.1.5/16'], ['fd00:20::5/64']),
    'ens1f1np1': _nic('mlx5_core', ['10.21.1.5/16']),
    'ib0': _nic('mlx5_core', []),
}


@pytest.mark.parametrize('kwargs, expected', [
    ({}, []),
    ({'names': ['eno1']}, ['eno1']),
    ({'names': 'eno1'}, ['eno1']),
    ({'names': ['nope']}, []),
    ({'drivers': ['mlx5_core']}, ['ens1f0np0', 'ens1f1np1', 'ib0']),
    ({'networks': ['10.20.0.0/16']}, ['ens1f0np0']),
    ({'networks': ['10.0.0.0/8']}, ['ens1f0np0', 'ens1f1np1']),
    ({'networks': ['fd00:20::/48']}, ['ens1f0np0']),
    ({'networks': ['10.20.0.0/16', '192.168.1.0/24']}, ['eno1', 'ens1f0np0']),
    ({'networks': ['172.16.0.0/12']}, []),
    ({'names': ['lo'], 'networks': ['10.21.0.0/16']}, ['ens1f1np1', 'lo']),
    ({'names': None, 'drivers': None, 'networks': None}, []),
])
def test_select_nics(kwargs, expected):
    assert select_nics(NICS, **kwargs) == expected


@pytest.mark.parametrize('nics, kwargs, message', [
    ([], {}, 'input must be the ansible_facts.nics dict (interface name -> facts), got list'),
    (NICS, {'networks': ['10.20.0.0/33']}, "networks[0] '10.20.0.0/33' is not a valid network (CIDR such as 10.20.0.0/16): "),
    (NICS, {'networks': ['10.0.0.0/8', 'training']}, "networks[1] 'training' is not a valid network (CIDR such as 10.20.0.0/16): "),
    (NICS, {'networks': {'a': 1}}, "networks must be a list, got dict: {'a': 1}"),
    ({'eth0': 'up'}, {}, "nics['eth0'] must be a dict, got 'up'"),
    ({'eth0': {'addresses': ['1.2.3.4/8']}}, {'networks': ['1.0.0.0/8']},
     "nics['eth0'].addresses must be a dict with ipv4/ipv6 lists, got ['1.2.3.4/8']"),
    ({'eth0': {'addresses': {'ipv4': ['bogus']}}}, {'networks': ['1.0.0.0/8']},
     "nics['eth0'].addresses.ipv4[0] 'bogus' is not an address: "),
])
def test_select_nics_errors(nics, kwargs, message):
    with pytest.raises(NicSelectError) as exc:
        select_nics(nics, **kwargs)
    assert str(exc.value).startswith(message)


def test_filter_wraps_errors():
    filters = nodeprep_net.FilterModule().filters()
    assert filters['nodeprep_select_nics'](NICS, drivers=['igb']) == ['eno1']
    with pytest.raises(AnsibleFilterError) as exc:
        filters['nodeprep_select_nics'](NICS, networks=['x'])
    assert str(exc.value).startswith("nodeprep_select_nics: networks[0] 'x' is not a valid network")
