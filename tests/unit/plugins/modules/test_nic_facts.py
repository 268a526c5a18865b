# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import random
import shutil
import subprocess

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ScriptedCommands, ethtool_fixture, run_main

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _nic
from ansible_collections.gpufleet.nodeprep.plugins.modules import nic_facts

IP = '/usr/sbin/ip'
ETHTOOL = '/usr/sbin/ethtool'


ENS3_K = ethtool_fixture('virtio_net-ens3_ethtool-k_hotsos.txt')
ENS3_I = ethtool_fixture('virtio_net-ens3_ethtool-i_hotsos.txt')
IP_ADDR = json.dumps([
    {'ifindex': 1, 'ifname': 'lo', 'mtu': 65536, 'addr_info': [
        {'family': 'inet', 'local': '127.0.0.1', 'prefixlen': 8}]},
    {'ifindex': 2, 'ifname': 'ens3', 'mtu': 1500, 'addr_info': [
        {'family': 'inet', 'local': '10.203.1.5', 'prefixlen': 24},
        {'family': 'inet6', 'local': 'fd00:203::5', 'prefixlen': 64}]},
])


def run_module(monkeypatch, capsys, args, calls, tools=None):
    runner = ScriptedCommands(calls).install(monkeypatch, {'ip': IP, 'ethtool': ETHTOOL} if tools is None else tools)
    result = run_main(nic_facts.main, args, capsys)
    assert runner.calls == [], 'commands not run: {0}'.format(runner.calls)
    return result


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    (tmp_path / 'ens3').mkdir()
    (tmp_path / 'ens3' / 'mtu').write_text('1500\n')
    (tmp_path / 'ens3' / 'speed').write_text('100000\n')
    monkeypatch.setattr(_nic, 'SYSFS_NET', str(tmp_path))


@pytest.mark.parametrize('args', [
    {'interfaces': ['ens3']},
    {'networks': ['10.203.0.0/16']},
    {'networks': ['fd00:203::/48']},
], ids=['by name', 'by IPv4 network', 'by IPv6 network'])
def test_nic_facts_selects_ens3(sysfs, monkeypatch, capsys, args):
    result = run_module(monkeypatch, capsys, args, [
        ([IP, '-j', 'addr', 'show'], 0, IP_ADDR, ''),
        ([ETHTOOL, '-k', 'ens3'], 0, ENS3_K, ''),
        ([ETHTOOL, '-i', 'ens3'], 0, ENS3_I, ''),
    ])
    assert result['changed'] is False
    nics = result['ansible_facts']['nics']
    assert list(nics) == ['ens3']
    ens3 = nics['ens3']
    assert ens3['mtu'] == 1500
    assert ens3['speed_mbps'] == 100000
    assert ens3['addresses'] == {'ipv4': ['10.203.1.5/24'], 'ipv6': ['fd00:203::5/64']}
    assert ens3['driver'] == {'driver': 'virtio_net', 'version': '1.0.0', 'firmware_version': None,
                              'bus_info': '0000:00:03.0'}
    assert ens3['nm_managed'] is None
    assert len(ens3['features']) == 56
    assert ens3['features']['rx-gro-hw'] == {'enabled': True, 'fixed': False}
    assert ens3['features']['rx-checksumming'] == {'enabled': True, 'fixed': True}


@pytest.mark.parametrize('args, calls, expected', [
    ({'interfaces': ['ib0']}, [([IP, '-j', 'addr', 'show'], 0, IP_ADDR, '')],
     {'msg': 'interface ib0 not found; interfaces present: ens3, lo'}),
    ({'networks': ['fabric']}, [([IP, '-j', 'addr', 'show'], 0, IP_ADDR, '')],
     {'msg': "networks[0] 'fabric' is not a valid network (CIDR such as 10.20.0.0/16): "
             "'fabric' does not appear to be an IPv4 or IPv6 network"}),
    ({}, [([IP, '-j', 'addr', 'show'], 1, '', 'RTNETLINK answers: Operation not permitted\n')],
     {'msg': 'ip -j addr show failed (rc=1): RTNETLINK answers: Operation not permitted',
      'cmd': [IP, '-j', 'addr', 'show'], 'rc': 1, 'stdout': '',
      'stderr': 'RTNETLINK answers: Operation not permitted\n'}),
], ids=['unknown interface', 'bad network', 'ip fails'])
def test_nic_facts_failures(sysfs, monkeypatch, capsys, args, calls, expected):
    result = run_module(monkeypatch, capsys, args, calls)
    assert result['failed'] is True
    for key, value in expected.items():
        assert result[key] == value
    assert 'ansible_facts' not in result


# ---------------------------------------------------------------------------
# Against the real kernel: a veth pair made by the test (peer in the test's own
# namespace, address 10.203.x.x only there), compared with what ethtool prints.


def _sh(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          check=True).stdout


@pytest.fixture
def veth():
    if os.geteuid() != 0 or not shutil.which('ip') or not shutil.which('ethtool'):
        pytest.skip('needs root, ip and ethtool')
    tag = '{0:06x}'.format(random.getrandbits(24))
    name, peer, netns = 'npt{0}a'.format(tag), 'npt{0}b'.format(tag), 'nptns{0}'.format(tag)
    try:
        _sh(['ip', 'netns', 'add', netns])
        _sh(['ip', 'link', 'add', name, 'mtu', '9000', 'type', 'veth', 'peer', 'name', peer])
        _sh(['ip', 'link', 'set', peer, 'netns', netns])
        _sh(['ip', '-n', netns, 'addr', 'add', '10.203.{0}.2/24'.format(random.randint(1, 254)), 'dev', peer])
        yield name
    finally:
        subprocess.call(['ip', 'link', 'del', name], stderr=subprocess.DEVNULL)
        subprocess.call(['ip', 'netns', 'del', netns], stderr=subprocess.DEVNULL)


@pytest.mark.netns
def test_real_veth_facts_match_ethtool(veth, monkeypatch, capsys):
    monkeypatch.setattr(AnsibleModule, 'get_bin_path',
                        lambda self, name, required=False, opt_dirs=None: shutil.which(name))
    result = run_main(nic_facts.main, {'interfaces': [veth]}, capsys)
    facts = result['ansible_facts']['nics'][veth]
    assert facts['mtu'] == 9000
    assert facts['addresses'] == {'ipv4': [], 'ipv6': []}
    assert facts['driver']['driver'] == 'veth'
    assert facts['driver']['bus_info'] is None
    # a veth whose link is down refuses to report a speed (EINVAL): null
    try:
        with open('/sys/class/net/{0}/speed'.format(veth)) as handle:
            speed = int(handle.read())
    except (IOError, OSError):
        speed = None
    assert facts['speed_mbps'] == speed
    # every line ethtool prints is in the facts with the same state
    printed = _sh([shutil.which('ethtool'), '-k', veth]).splitlines()[1:]
    assert len(printed) == len(facts['features'])
    for line in printed:
        name, _sep, state = line.strip().partition(': ')
        assert facts['features'][name]['enabled'] is state.startswith('on'), line
        if state.endswith('[fixed]'):
            assert facts['features'][name]['fixed'] is True, line
