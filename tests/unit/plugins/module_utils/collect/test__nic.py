# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _nic
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nic_selection
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import parse_ethtool_k
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import (
    NicError,
    select_nics,
    parse_networks,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nic_features import collect_nic_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nic import (
    nm_device_states,
    nm_managed,
    persistence_method,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nic_offload import (
    features_as_parsed,
    offload_plan,
)

ETHTOOL_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '..', '..', '..', 'fixtures', 'ethtool')
IP = '/usr/sbin/ip'
ETHTOOL = '/usr/sbin/ethtool'
NMCLI = '/usr/bin/nmcli'
C = {'LC_ALL': 'C', 'LANGUAGE': 'C'}


def fixture(name):
    with open(os.path.join(ETHTOOL_DIR, name)) as handle:
        return handle.read()


LO_K = fixture('loopback-lo_ethtool-k_hotsos.txt')
LO_I_ERR = fixture('loopback-lo_ethtool-i-unsupported_hotsos.txt')
ENS3_K = fixture('virtio_net-ens3_ethtool-k_hotsos.txt')
ENS3_I = fixture('virtio_net-ens3_ethtool-i_hotsos.txt')
MLX_I = fixture('mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-i_xtremeownage-blog.txt')
MLX_K = '\n'.join(line[8:] for line in fixture(
    'mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt').split('\n'))

IP_ADDR = json.dumps([
    {'ifindex': 1, 'ifname': 'lo', 'mtu': 65536, 'addr_info': [
        {'family': 'inet', 'local': '127.0.0.1', 'prefixlen': 8, 'scope': 'host'},
        {'family': 'inet6', 'local': '::1', 'prefixlen': 128, 'scope': 'host'}]},
    {'ifindex': 2, 'ifname': 'ens3', 'mtu': 1500, 'addr_info': [
        {'family': 'inet', 'local': '10.203.1.5', 'prefixlen': 24, 'scope': 'global'},
        {'family': 'inet6', 'local': 'fe80::5054:ff:fe12:3456', 'prefixlen': 64, 'scope': 'link'}]},
    {'ifindex': 3, 'ifname': 'enp1s0f0np0', 'mtu': 9000, 'addr_info': [
        {'family': 'inet6', 'local': 'fd00:203::7', 'prefixlen': 64, 'scope': 'global'}]},
])


class FakeModule(object):
    """Just what the collectors use: run_command, get_bin_path, warn."""

    def __init__(self, calls, tools=None):
        self.calls = list(calls)
        self.tools = tools if tools is not None else {'ip': IP, 'ethtool': ETHTOOL}
        self.ran = []
        self.warnings = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.tools.get(name)

    def run_command(self, argv, environ_update=None, **kwargs):
        assert environ_update == C
        assert self.calls, 'unexpected command {0}'.format(argv)
        expected, rc, out, err = self.calls.pop(0)
        assert argv == expected
        self.ran.append(argv)
        return rc, out, err

    def warn(self, msg):
        self.warnings.append(msg)


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    values = {'lo': {'mtu': '65536\n'}, 'ens3': {'mtu': '1500\n', 'speed': '-1\n'},
              'enp1s0f0np0': {'mtu': '9000\n', 'speed': '25000\n'}}
    for ifname, attrs in values.items():
        (tmp_path / ifname).mkdir()
        for attr, value in attrs.items():
            (tmp_path / ifname / attr).write_text(value)
    monkeypatch.setattr(_nic, 'SYSFS_NET', str(tmp_path))
    return tmp_path


def _ip():
    return ([IP, '-j', 'addr', 'show'], 0, IP_ADDR, '')


def _k(ifname, out):
    return ([ETHTOOL, '-k', ifname], 0, out, '')


def _i(ifname, out, rc=0, err=''):
    return ([ETHTOOL, '-i', ifname], rc, out, err)


ENS3_FACTS = {
    'mtu': 1500,
    'speed_mbps': None,
    'addresses': {'ipv4': ['10.203.1.5/24'], 'ipv6': ['fe80::5054:ff:fe12:3456/64']},
    'driver': {'driver': 'virtio_net', 'version': '1.0.0', 'firmware_version': None, 'bus_info': '0000:00:03.0'},
}
MLX_FACTS = {
    'mtu': 9000,
    'speed_mbps': 25000,
    'addresses': {'ipv4': [], 'ipv6': ['fd00:203::7/64']},
    'driver': {'driver': 'mlx5_core', 'version': '6.8.12-8-pve', 'firmware_version': '14.32.1900 (MT_2420110034)',
               'bus_info': '0000:01:00.0'},
}
LO_FACTS = {
    'mtu': 65536,
    'speed_mbps': None,
    'addresses': {'ipv4': ['127.0.0.1/8'], 'ipv6': ['::1/128']},
    'driver': {'driver': None, 'version': None, 'firmware_version': None, 'bus_info': None},
}

_COLLECT = [
    ('all interfaces, no nmcli', dict(), {'ip': IP, 'ethtool': ETHTOOL},
     [_ip(), _k('lo', LO_K), _i('lo', '', 71, LO_I_ERR), _k('ens3', ENS3_K), _i('ens3', ENS3_I),
      _k('enp1s0f0np0', MLX_K), _i('enp1s0f0np0', MLX_I)],
     {'lo': (LO_FACTS, None), 'ens3': (ENS3_FACTS, None), 'enp1s0f0np0': (MLX_FACTS, None)}),
    ('named interface, NetworkManager manages it', dict(interfaces=['ens3']),
     {'ip': IP, 'ethtool': ETHTOOL, 'nmcli': NMCLI},
     [_ip(), ([NMCLI, '-t', '-f', 'DEVICE,STATE', 'device'], 0,
              'ens3:connected\nenp1s0f0np0:unmanaged\nlo:connected (externally)\n', ''),
      _k('ens3', ENS3_K), _i('ens3', ENS3_I)],
     {'ens3': (ENS3_FACTS, True)}),
    ('by IPv4 network, host bits allowed; NetworkManager lists it unmanaged', dict(networks=['10.203.1.77/16']),
     {'ip': IP, 'ethtool': ETHTOOL, 'nmcli': NMCLI},
     [_ip(), ([NMCLI, '-t', '-f', 'DEVICE,STATE', 'device'], 0, 'ens3:unmanaged\n', ''),
      _k('ens3', ENS3_K), _i('ens3', ENS3_I)],
     {'ens3': (ENS3_FACTS, False)}),
    ('by IPv6 network plus a name; NetworkManager not running', dict(interfaces=['lo'], networks=['fd00:203::/64']),
     {'ip': IP, 'ethtool': ETHTOOL, 'nmcli': NMCLI},
     [_ip(), ([NMCLI, '-t', '-f', 'DEVICE,STATE', 'device'], 8, '', 'Error: NetworkManager is not running.\n'),
      _k('lo', LO_K), _i('lo', '', 71, LO_I_ERR), _k('enp1s0f0np0', MLX_K), _i('enp1s0f0np0', MLX_I)],
     {'lo': (LO_FACTS, None), 'enp1s0f0np0': (MLX_FACTS, None)}),
    ('no interface in the network: no ethtool at all', dict(networks=['192.0.2.0/24']),
     {'ip': IP, 'ethtool': ETHTOOL}, [_ip()], {}),
]


@pytest.mark.parametrize('kwargs, tools, calls, expected',
                         [case[1:] for case in _COLLECT], ids=[case[0] for case in _COLLECT])
def test_collect_nic_facts(sysfs, kwargs, tools, calls, expected):
    module = FakeModule(calls, tools)
    facts = collect_nic_facts(module, **kwargs)
    assert module.calls == []
    assert sorted(facts) == sorted(expected)
    for ifname, (base, managed) in expected.items():
        entry = dict(facts[ifname])
        features = entry.pop('features')
        assert entry == dict(base, nm_managed=managed)
        assert features['generic-receive-offload'] == {'enabled': True, 'fixed': False}
    if 'enp1s0f0np0' in facts:
        assert facts['enp1s0f0np0']['features']['highdma'] == {'enabled': True, 'fixed': True}
        assert len(facts['enp1s0f0np0']['features']) == 65


def test_collect_mtu_falls_back_to_ip(sysfs):
    (sysfs / 'ens3' / 'mtu').unlink()
    module = FakeModule([_ip(), _k('ens3', ENS3_K), _i('ens3', ENS3_I)])
    assert collect_nic_facts(module, interfaces=['ens3'])['ens3']['mtu'] == 1500


_COLLECT_ERRORS = [
    ('unknown interface', dict(interfaces=['ib0', 'ens3', 'eth9']), {'ip': IP, 'ethtool': ETHTOOL}, [_ip()],
     {'msg': 'interface ib0, eth9 not found; interfaces present: enp1s0f0np0, ens3, lo'}),
    ('bad network', dict(networks=['10.0.0.0/33']), {'ip': IP, 'ethtool': ETHTOOL}, [_ip()],
     {'msg': "networks[0] '10.0.0.0/33' is not a valid network (CIDR such as 10.20.0.0/16): "
             "'10.0.0.0/33' does not appear to be an IPv4 or IPv6 network"}),
    ('no ip', dict(), {'ethtool': ETHTOOL}, [],
     {'msg': 'ip was not found in PATH or the sbin directories; install the iproute2 (iproute on EL) package'}),
    ('no ethtool', dict(), {'ip': IP}, [_ip()],
     {'msg': 'ethtool was not found in PATH or the sbin directories; install the ethtool package'}),
    ('ip fails', dict(), {'ip': IP, 'ethtool': ETHTOOL},
     [([IP, '-j', 'addr', 'show'], 255, '', 'Option "-j" is unknown, try "ip -help".\n')],
     {'msg': 'ip -j addr show failed (rc=255): Option "-j" is unknown, try "ip -help".',
      'cmd': [IP, '-j', 'addr', 'show'], 'rc': 255, 'stdout': '',
      'stderr': 'Option "-j" is unknown, try "ip -help".\n'}),
    ('ip prints no JSON', dict(), {'ip': IP, 'ethtool': ETHTOOL},
     [([IP, '-j', 'addr', 'show'], 0, 'lo: <LOOPBACK>', '')],
     {'msg': 'ip -j addr show printed something that is not JSON: Expecting value: line 1 column 1 (char 0)',
      'cmd': [IP, '-j', 'addr', 'show'], 'rc': 0, 'stdout': 'lo: <LOOPBACK>', 'stderr': ''}),
    ('ethtool -k fails', dict(interfaces=['ens3']), {'ip': IP, 'ethtool': ETHTOOL},
     [_ip(), ([ETHTOOL, '-k', 'ens3'], 1, '', 'netlink error: no device matches name (offset 24)\n'
              'netlink error: No such device\n')],
     {'msg': 'interface ens3: ethtool -k failed (rc=1): netlink error: no device matches name (offset 24)\n'
             'netlink error: No such device',
      'cmd': [ETHTOOL, '-k', 'ens3'], 'rc': 1, 'stdout': '',
      'stderr': 'netlink error: no device matches name (offset 24)\nnetlink error: No such device\n'}),
    # (Both ethtool outputs are read on the node before either is parsed: collect/_nic.read_nics.)
    ('ethtool -k unreadable', dict(interfaces=['ens3']), {'ip': IP, 'ethtool': ETHTOOL},
     [_ip(), _k('ens3', 'Features for ens3:\ngro = on\n'), _i('ens3', ENS3_I)],
     {'msg': "interface ens3: ethtool -k output line 2: cannot parse 'gro = on'; expected 'name: on|off' "
             "optionally followed by [fixed], [requested on] or [requested off]",
      'cmd': [ETHTOOL, '-k', 'ens3'], 'rc': 0, 'stdout': 'Features for ens3:\ngro = on\n', 'stderr': ''}),
    ('ethtool -i fails other than not supported', dict(interfaces=['ens3']), {'ip': IP, 'ethtool': ETHTOOL},
     [_ip(), _k('ens3', ENS3_K), _i('ens3', '', 1, 'Cannot get driver information: No such device\n')],
     {'msg': 'interface ens3: ethtool -i failed (rc=1): Cannot get driver information: No such device',
      'cmd': [ETHTOOL, '-i', 'ens3'], 'rc': 1, 'stdout': '',
      'stderr': 'Cannot get driver information: No such device\n'}),
]


@pytest.mark.parametrize('kwargs, tools, calls, expected',
                         [case[1:] for case in _COLLECT_ERRORS], ids=[case[0] for case in _COLLECT_ERRORS])
def test_collect_nic_facts_errors(sysfs, kwargs, tools, calls, expected):
    module = FakeModule(calls, tools)
    with pytest.raises(NicError) as exc:
        collect_nic_facts(module, **kwargs)
    assert exc.value.fail_kwargs() == expected
    assert module.calls == []


@pytest.mark.parametrize('out, rc, expected', [
    ('eth0:connected\nlo:connected (externally)\nib0:unmanaged\nwlan0:unavailable\n', 0,
     {'eth0': 'connected', 'lo': 'connected (externally)', 'ib0': 'unmanaged', 'wlan0': 'unavailable'}),
    ('', 8, None),
])
def test_nm_device_states(out, rc, expected):
    module = FakeModule([([NMCLI, '-t', '-f', 'DEVICE,STATE', 'device'], rc, out, '')],
                        {'nmcli': NMCLI})
    assert nm_device_states(module) == expected


def test_nm_device_states_without_nmcli():
    module = FakeModule([], {})
    assert nm_device_states(module) is None
    assert module.ran == []


@pytest.mark.parametrize('states, ifname, expected', [
    (None, 'eth0', None),
    ({'eth0': 'connected'}, 'eth0', True),
    ({'eth0': 'disconnected'}, 'eth0', True),
    ({'eth0': 'unmanaged'}, 'eth0', False),
    ({'eth0': 'connected'}, 'eth1', None),
])
def test_nm_managed(states, ifname, expected):
    assert nm_managed(states, ifname) is expected


def test_parse_networks():
    assert [str(n) for n in parse_networks(['10.203.1.9/16', 'fd00::1/64'])] == ['10.203.0.0/16', 'fd00::/64']


@pytest.mark.parametrize('managed, link_unsupported, systemd, expected', [
    (True, ['tcp-segmentation-offload'], True, 'networkmanager'),
    (False, [], True, 'systemd-networkd-link'),
    (None, [], True, 'systemd-networkd-link'),
    (None, [], False, 'unit'),
    (False, ['tcp-segmentation-offload'], True, 'unit'),
])
def test_persistence_method(tmp_path, monkeypatch, managed, link_unsupported, systemd, expected):
    path = tmp_path / 'system'
    if systemd:
        path.mkdir()
    monkeypatch.setattr(_nic, 'RUN_SYSTEMD', str(path))
    assert persistence_method(managed, link_unsupported) == expected


# ---------------------------------------------------------------------------------------------------------------
# the one NIC selection and the readiness view of offloads


def test_select_nics_by_name_driver_network():
    nics = {'eno1': {'driver': {'driver': 'igb'}, 'addresses': {'ipv4': ['192.168.1.5/24'], 'ipv6': []}},
            'ens1': {'driver': {'driver': 'mlx5_core'}, 'addresses': {'ipv4': ['10.20.1.5/16'], 'ipv6': []}},
            'lo': {'driver': None, 'addresses': {'ipv4': ['127.0.0.1/8'], 'ipv6': ['::1/128']}}}
    assert select_nics(nics) == []
    assert select_nics(nics, names='lo') == ['lo']
    assert select_nics(nics, drivers=['mlx5_core']) == ['ens1']
    assert select_nics(nics, networks=['10.0.0.0/8', '::1/128']) == ['ens1', 'lo']
    with pytest.raises(NicError) as exc:
        select_nics(nics, networks=['10.0.0.0/8', 'fabric'], what='nodeprep_nic_offload_networks')
    assert str(exc.value).startswith("nodeprep_nic_offload_networks[1] 'fabric' is not a valid network")


# The selection table (it served the former nodeprep_select_nics filter; the roles, nic_facts and readiness use it).

def _selected_nic(driver, ipv4=(), ipv6=()):
    return {
        'mtu': 1500, 'speed_mbps': None,
        'addresses': {'ipv4': list(ipv4), 'ipv6': list(ipv6)},
        'driver': {'driver': driver, 'version': None, 'firmware_version': None, 'bus_info': None},
        'features': {}, 'nm_managed': None,
    }


SELECT_NICS = {
    'lo': _selected_nic(None, ['127.0.0.1/8'], ['::1/128']),
    'eno1': _selected_nic('igb', ['192.168.1.10/24']),
    'ens1f0np0': _selected_nic('mlx5_core', ['10.20.1.5/16'], ['fd00:20::5/64']),
    'ens1f1np1': _selected_nic('mlx5_core', ['10.21.1.5/16']),
    'ib0': _selected_nic('mlx5_core', []),
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
def test_select_nics_table(kwargs, expected):
    assert select_nics(SELECT_NICS, **kwargs) == expected


@pytest.mark.parametrize('nics, kwargs, message', [
    ([], {}, 'input must be the ansible_facts.nics dict (interface name -> facts), got list'),
    (SELECT_NICS, {'networks': ['10.20.0.0/33']}, "networks[0] '10.20.0.0/33' is not a valid network (CIDR such as 10.20.0.0/16): "),
    (SELECT_NICS, {'networks': ['10.0.0.0/8', 'training']}, "networks[1] 'training' is not a valid network (CIDR such as 10.20.0.0/16): "),
    (SELECT_NICS, {'networks': {'a': 1}}, "networks must be a list, got dict: {'a': 1}"),
    ({'eth0': 'up'}, {}, "nics['eth0'] must be a dict, got 'up'"),
    ({'eth0': {'addresses': ['1.2.3.4/8']}}, {'networks': ['1.0.0.0/8']},
     "nics['eth0'].addresses must be a dict with ipv4/ipv6 lists, got ['1.2.3.4/8']"),
    ({'eth0': {'addresses': {'ipv4': ['bogus']}}}, {'networks': ['1.0.0.0/8']},
     "nics['eth0'].addresses.ipv4[0] 'bogus' is not an address: "),
])
def test_select_nics_errors(nics, kwargs, message):
    with pytest.raises(NicError) as exc:
        select_nics(nics, **kwargs)
    assert str(exc.value).startswith(message)


@pytest.mark.parametrize('name', ['loopback-lo_ethtool-k_hotsos.txt',
                                  'mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt'])
def test_features_as_parsed_rebuilds_the_groups(name):
    parsed = parse_ethtool_k(fixture(name))
    assert parsed['groups']
    rebuilt = features_as_parsed(dict((k, dict(v)) for k, v in parsed['features'].items()))
    assert dict(rebuilt['groups']) == dict(parsed['groups'])
    assert list(rebuilt['features']) == list(parsed['features'])


@pytest.mark.parametrize('wanted, changes', [
    ({'gro': False}, {}),
    ({'generic-receive-offload': False, 'lro': False}, {}),
    ({'rx-gro': False}, {}),
    ({'gro': True}, {'generic-receive-offload': {'before': False, 'after': True}}),
])
def test_offload_plan_uses_the_role_names(wanted, changes):
    features = {'generic-receive-offload': {'enabled': False, 'fixed': False},
                'large-receive-offload': {'enabled': False, 'fixed': True},
                'tcp-segmentation-offload': {'enabled': True, 'fixed': False},
                'tx-tcp-segmentation': {'enabled': True, 'fixed': False},
                'tx-tcp6-segmentation': {'enabled': True, 'fixed': False}}
    entry = offload_plan({'ens1': {'features': features}}, ['ens1'], wanted)['ens1']
    assert entry['error'] is None
    assert dict(entry['changes']) == changes


def test_offload_plan_refuses_like_the_module():
    nics = {'ens1': {'features': {'large-receive-offload': {'enabled': False, 'fixed': True}}, 'nm_managed': None}}
    assert offload_plan(nics, ['ens1'], {'lro': True})['ens1']['error'] == (
        'interface ens1: fixed by the driver, cannot change: large-receive-offload [lro] (is off, asked on); set '
        'ignore_fixed to skip them')
    skipped = offload_plan(nics, ['ens1'], {'lro': True}, ignore_fixed=True)['ens1']
    assert skipped['error'] is None
    assert skipped['skipped_fixed'] == ['large-receive-offload']
    # A feature skipped is not persisted either.
    assert skipped['persistence'] == {'nm_managed': None, 'nm_properties': {}, 'nm_unsupported': [], 'link_keys': {},
                                      'link_unsupported': []}


# ---------------------------------------------------------------------------------------------------------------------
# The NetworkManager connection of a managed NIC, read in the gather for the nic_offload plan (the same two nmcli
# commands the role ran itself before: nmcli -g GENERAL.CONNECTION device show, nmcli -g <props> connection show).

PROPS = ['ethtool.feature-gro', 'ethtool.feature-lro']
DEVICE_SHOW = [NMCLI, '-g', 'GENERAL.CONNECTION', 'device', 'show', 'ens3']
CONN_SHOW = [NMCLI, '-g', 'ethtool.feature-gro,ethtool.feature-lro', 'connection', 'show', 'System ens3']


@pytest.mark.parametrize('calls, expected', [
    ([(DEVICE_SHOW, 0, 'System ens3\n', ''), (CONN_SHOW, 0, 'off\non\n', '')],
     {'name': 'System ens3', 'properties': {'ethtool.feature-gro': 'off', 'ethtool.feature-lro': 'on'},
      'error': None}),
    ([(DEVICE_SHOW, 0, 'System ens3\n', ''), (CONN_SHOW, 0, '\n\n', '')],
     {'name': 'System ens3', 'properties': {'ethtool.feature-gro': '', 'ethtool.feature-lro': ''}, 'error': None}),
    ([(DEVICE_SHOW, 0, '\n', '')], {'name': None, 'properties': {}, 'error': None}),
    ([(DEVICE_SHOW, 8, '', 'Error: NetworkManager is not running.\n')],
     {'name': None, 'properties': {}, 'error': '/usr/bin/nmcli -g GENERAL.CONNECTION device show ens3 (rc=8): Error: '
                                               'NetworkManager is not running.'}),
    ([(DEVICE_SHOW, 0, 'System ens3\n', ''), (CONN_SHOW, 10, '', "Error: System ens3 - no such connection profile.\n")],
     {'name': None, 'properties': {}, 'error': '/usr/bin/nmcli -g ethtool.feature-gro,ethtool.feature-lro connection show '
                                               'System ens3 (rc=10): Error: System ens3 - no such connection profile.'}),
], ids=['read', 'nothing set', 'no connection', 'NetworkManager down', 'connection gone'])
def test_read_nm_connection(calls, expected):
    module = FakeModule(calls, {'nmcli': NMCLI})
    assert _nic.read_nm_connection(module, NMCLI, 'ens3', PROPS) == expected
    assert module.calls == []


def test_collect_reads_the_connection_of_a_managed_nic_only_when_asked(sysfs):
    calls = [_ip(), ([NMCLI, '-t', '-f', 'DEVICE,STATE', 'device'], 0, 'ens3:connected\n', ''),
             _k('ens3', ENS3_K), _i('ens3', ENS3_I), (DEVICE_SHOW, 0, 'System ens3\n', ''),
             (CONN_SHOW, 0, 'off\noff\n', '')]
    module = FakeModule(calls, {'ip': IP, 'ethtool': ETHTOOL, 'nmcli': NMCLI})
    facts = collect_nic_facts(module, interfaces=['ens3'], nm_properties=PROPS)
    assert module.calls == []
    assert facts['ens3']['nm_connection'] == {
        'name': 'System ens3', 'properties': {'ethtool.feature-gro': 'off', 'ethtool.feature-lro': 'off'},
        'error': None}


@pytest.mark.parametrize('networks, valid', [
    ([], True), (['10.20.0.0/16'], True), (['10.20.0.0/16', 'fd00::/64'], True), ('10.20.0.0/16', True),
    (['fabric'], False), (['10.20.0.0/16', '10.0.0.0/33'], False), ({'a': 1}, False),
])
def test_valid_networks(networks, valid):
    assert _nic_selection.valid_networks(networks) is valid
