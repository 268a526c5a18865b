# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import random
import shutil
import subprocess

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ScriptedCommands, ethtool_fixture, run_main

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _nic
from ansible_collections.gpufleet.nodeprep.plugins.modules import nic_offload

ETHTOOL = '/usr/sbin/ethtool'
NMCLI = '/usr/bin/nmcli'


# the blog copy with its 8-space markdown indent removed
MLX_K = '\n'.join(line[8:] for line in ethtool_fixture(
    'mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt').split('\n'))
ENS3_K = ethtool_fixture('virtio_net-ens3_ethtool-k_hotsos.txt')
MLX_K_GRO_OFF = MLX_K.replace('generic-receive-offload: on', 'generic-receive-offload: off')
ENS3_K_GRO_OFF = ENS3_K.replace('generic-receive-offload: on', 'generic-receive-offload: off')
SMALL_K = 'Features for veth1:\ngeneric-receive-offload: off\nhighdma: on [fixed]\nrx-gro-list: off\n'


def _k(ifname, out):
    return ([ETHTOOL, '-k', ifname], 0, out, '')


def run_module(monkeypatch, capsys, args, calls, tools=None, systemd=False, tmp_path=None):
    tools = {'ethtool': ETHTOOL} if tools is None else tools
    runner = ScriptedCommands(calls).install(monkeypatch, tools)
    monkeypatch.setattr(_nic, 'RUN_SYSTEMD', '/' if systemd else '/nonexistent/run/systemd/system')
    result = run_main(nic_offload.main, args, capsys)
    assert runner.calls == [], 'commands not run: {0}'.format(runner.calls)
    return result


NO_NM = {'nm_managed': None, 'method': 'unit'}


def test_gro_off_changes(monkeypatch, capsys):
    result = run_module(monkeypatch, capsys, {'interface': 'enp1s0f0np0', 'features': {'gro': False}}, [
        _k('enp1s0f0np0', MLX_K),
        ([ETHTOOL, '-K', 'enp1s0f0np0', 'gro', 'off'], 0, '', ''),
        _k('enp1s0f0np0', MLX_K_GRO_OFF),
    ], systemd=True)
    assert result['changed'] is True
    assert result['interfaces'] == {'enp1s0f0np0': {
        'changed': True,
        'changes': {'generic-receive-offload': {'before': True, 'after': False}},
        'skipped_fixed': [],
        'cmd': [ETHTOOL, '-K', 'enp1s0f0np0', 'gro', 'off'],
    }}
    assert result['persistence'] == {'enp1s0f0np0': {
        'nm_managed': None,
        'method': 'systemd-networkd-link',
        'nm_properties': {'ethtool.feature-gro': 'off'},
        'nm_unsupported': [],
        'link_keys': {'GenericReceiveOffload': 'false'},
        'link_unsupported': [],
    }}
    assert result['diff'] == {'before': 'enp1s0f0np0 generic-receive-offload: on\n',
                              'after': 'enp1s0f0np0 generic-receive-offload: off\n',
                              'before_header': 'ethtool -k', 'after_header': 'ethtool -k'}


def test_gro_off_already_off_runs_nothing(monkeypatch, capsys):
    result = run_module(monkeypatch, capsys, {'interface': ['enp1s0f0np0'], 'features': {'gro': 'off'}},
                        [_k('enp1s0f0np0', MLX_K_GRO_OFF)])
    assert result['changed'] is False
    assert result['interfaces']['enp1s0f0np0'] == {'changed': False, 'changes': {}, 'skipped_fixed': [],
                                                   'cmd': None}
    assert result['diff']['before'] == result['diff']['after'] == ''


def test_check_mode_predicts_and_runs_no_set(monkeypatch, capsys):
    result = run_module(monkeypatch, capsys, {'interface': 'enp1s0f0np0', 'features': {'gro': False, 'lro': True},
                                              '_ansible_check_mode': True},
                        [_k('enp1s0f0np0', MLX_K)])
    assert result['changed'] is True
    assert result['interfaces']['enp1s0f0np0']['cmd'] == [ETHTOOL, '-K', 'enp1s0f0np0', 'gro', 'off', 'lro', 'on']
    assert result['interfaces']['enp1s0f0np0']['changes'] == {
        'generic-receive-offload': {'before': True, 'after': False},
        'large-receive-offload': {'before': False, 'after': True}}


def test_two_interfaces_one_already_right_networkmanager(monkeypatch, capsys):
    result = run_module(monkeypatch, capsys, {'interface': ['enp1s0f0np0', 'ens3'],
                                              'features': {'generic-receive-offload': False}}, [
        ([NMCLI, '-t', '-f', 'DEVICE,STATE', 'device'], 0, 'enp1s0f0np0:connected\nens3:unmanaged\n', ''),
        _k('enp1s0f0np0', MLX_K_GRO_OFF),
        _k('ens3', ENS3_K),
        ([ETHTOOL, '-K', 'ens3', 'gro', 'off'], 0, '', ''),
        _k('ens3', ENS3_K_GRO_OFF),
    ], tools={'ethtool': ETHTOOL, 'nmcli': NMCLI})
    assert result['changed'] is True
    assert result['interfaces']['enp1s0f0np0']['changed'] is False
    assert result['interfaces']['ens3']['changed'] is True
    assert result['persistence']['enp1s0f0np0']['method'] == 'networkmanager'
    assert result['persistence']['enp1s0f0np0']['nm_managed'] is True
    assert result['persistence']['ens3']['method'] == 'unit'
    assert result['persistence']['ens3']['nm_managed'] is False
    assert result['diff']['after'] == 'ens3 generic-receive-offload: off\n'


def test_ignore_fixed_warns_and_skips(monkeypatch, capsys):
    # record warnings at the source: how they reach the result differs between ansible-core releases
    # and with what else the test process has imported
    warnings = []
    monkeypatch.setattr(AnsibleModule, 'warn', lambda self, msg, *args, **kwargs: warnings.append(msg))
    result = run_module(monkeypatch, capsys, {'interface': 'veth1', 'ignore_fixed': True,
                                              'features': {'highdma': False, 'rx-gro-list': True}}, [
        _k('veth1', SMALL_K),
        ([ETHTOOL, '-K', 'veth1', 'rx-gro-list', 'on'], 0, '', ''),
        _k('veth1', SMALL_K.replace('rx-gro-list: off', 'rx-gro-list: on')),
    ])
    assert result['interfaces']['veth1']['skipped_fixed'] == ['highdma']
    assert warnings == ['interface veth1: highdma is fixed by the driver and was left as it is']
    assert result['persistence']['veth1']['nm_properties'] == {'ethtool.feature-rx-gro-list': 'on'}
    assert result['persistence']['veth1']['link_unsupported'] == ['rx-gro-list']


_FAILURES = [
    ('the article\'s rdma-offload', {'interface': 'veth1', 'features': {'rdma-offload': False}},
     [_k('veth1', SMALL_K)],
     {'msg': "interface veth1: unknown feature 'rdma-offload'; the features this device has are: "
             "generic-receive-offload, highdma, rx-gro-list; ethtool -K also takes the short names: gro"}),
    ('fixed feature', {'interface': 'veth1', 'features': {'highdma': False}},
     [_k('veth1', SMALL_K)],
     {'msg': 'interface veth1: fixed by the driver, cannot change: highdma (is on, asked off); '
             'set ignore_fixed to skip them'}),
    ('ethtool -K refuses', {'interface': 'veth1', 'features': {'rx-gro-list': True}},
     [_k('veth1', SMALL_K),
      ([ETHTOOL, '-K', 'veth1', 'rx-gro-list', 'on'], 1, 'Actual changes:\nrx-gro-list: off [requested on]\n',
       'Could not change any device features\n'),
      # read again to tell whether part of the request took (here nothing did: changed stays false)
      _k('veth1', SMALL_K)],
     {'msg': 'interface veth1: ethtool -K failed (rc=1): Actual changes: rx-gro-list: off [requested on] '
             'Could not change any device features',
      'cmd': [ETHTOOL, '-K', 'veth1', 'rx-gro-list', 'on'], 'rc': 1,
      'stdout': 'Actual changes:\nrx-gro-list: off [requested on]\n',
      'stderr': 'Could not change any device features\n'}),
    ('ethtool -K exits 0 but nothing took', {'interface': 'veth1', 'features': {'gro': True}},
     [_k('veth1', SMALL_K), ([ETHTOOL, '-K', 'veth1', 'gro', 'on'], 0, '', ''),
      _k('veth1', SMALL_K.replace('generic-receive-offload: off',
                                  'generic-receive-offload: off [requested on]'))],
     {'msg': 'interface veth1: ethtool -K exited 0 but these features did not take: '
             'generic-receive-offload (is off, asked on)',
      'cmd': [ETHTOOL, '-K', 'veth1', 'gro', 'on'], 'rc': 0, 'stdout': '', 'stderr': ''}),
    ('no such interface', {'interface': 'nope0', 'features': {'gro': True}},
     [([ETHTOOL, '-k', 'nope0'], 1, '', 'netlink error: no device matches name (offset 24)\n'
                                        'netlink error: No such device\n')],
     {'msg': 'interface nope0: ethtool -k failed (rc=1): netlink error: no device matches name (offset 24)\n'
             'netlink error: No such device',
      'cmd': [ETHTOOL, '-k', 'nope0'], 'rc': 1, 'stdout': '',
      'stderr': 'netlink error: no device matches name (offset 24)\nnetlink error: No such device\n'}),
    ('not a boolean', {'interface': 'veth1', 'features': {'gro': 'maybe'}}, [],
     {'msg': "features: the value for 'gro' is 'maybe'; expected a boolean (true/false, yes/no, on/off)"}),
    ('no features', {'interface': 'veth1', 'features': {}}, [],
     {'msg': 'features is empty; give at least one feature name and its wanted state'}),
]


@pytest.mark.parametrize('args, calls, expected', [case[1:] for case in _FAILURES],
                         ids=[case[0] for case in _FAILURES])
def test_failures(monkeypatch, capsys, args, calls, expected):
    result = run_module(monkeypatch, capsys, args, calls)
    assert result['failed'] is True
    for key, value in expected.items():
        assert result[key] == value
    assert set(expected) - {'msg'} == set(result) & {'cmd', 'rc', 'stdout', 'stderr'}


def test_missing_ethtool(monkeypatch, capsys):
    result = run_module(monkeypatch, capsys, {'interface': 'veth1', 'features': {'gro': True}}, [], tools={})
    assert result['msg'] == 'ethtool was not found in PATH or the sbin directories; install the ethtool package'


# ---------------------------------------------------------------------------
# On a real veth pair. The pair lives in the root namespace (the module has no
# netns option); its peer is moved into a namespace this test creates, and the
# only address used (10.203.x.x) is set inside that namespace.


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
        _sh(['ip', 'link', 'add', name, 'type', 'veth', 'peer', 'name', peer])
        _sh(['ip', 'link', 'set', peer, 'netns', netns])
        _sh(['ip', '-n', netns, 'addr', 'add', '10.203.{0}.2/24'.format(random.randint(1, 254)), 'dev', peer])
        yield name
    finally:
        subprocess.call(['ip', 'link', 'del', name], stderr=subprocess.DEVNULL)
        subprocess.call(['ip', 'netns', 'del', netns], stderr=subprocess.DEVNULL)


def _real(monkeypatch, capsys, args):
    monkeypatch.setattr(AnsibleModule, 'get_bin_path',
                        lambda self, name, required=False, opt_dirs=None: shutil.which(name))
    return run_main(nic_offload.main, args, capsys)


@pytest.mark.netns
def test_real_veth_gro(veth, monkeypatch, capsys):
    ethtool = shutil.which('ethtool')
    # veth starts with GRO off on current kernels: turn it on first, with ethtool itself
    _sh([ethtool, '-K', veth, 'gro', 'on'])
    assert 'generic-receive-offload: on\n' in _sh([ethtool, '-k', veth])

    check = _real(monkeypatch, capsys, {'interface': veth, 'features': {'gro': False}, '_ansible_check_mode': True})
    assert check['changed'] is True
    assert 'generic-receive-offload: on\n' in _sh([ethtool, '-k', veth])

    first = _real(monkeypatch, capsys, {'interface': veth, 'features': {'gro': False}})
    assert first['changed'] is True, first
    assert first['interfaces'][veth]['cmd'] == [ethtool, '-K', veth, 'gro', 'off']
    assert 'generic-receive-offload: off\n' in _sh([ethtool, '-k', veth])

    second = _real(monkeypatch, capsys, {'interface': veth, 'features': {'generic-receive-offload': False}})
    assert second['changed'] is False, second
    assert second['interfaces'][veth]['cmd'] is None

    refused = _real(monkeypatch, capsys, {'interface': veth, 'features': {'rdma-offload': False}})
    assert refused['failed'] is True
    assert refused['msg'].startswith("interface {0}: unknown feature 'rdma-offload'; the features this device "
                                     "has are: rx-checksumming, tx-checksumming, ".format(veth))
    assert ', generic-receive-offload, ' in refused['msg']
    assert refused['msg'].endswith('; ethtool -K also takes the short names: rx, tx, sg, tso, gso, gro, lro, '
                                   'rxvlan, txvlan, ntuple, rxhash')


@pytest.mark.netns
def test_real_veth_fixed_and_group(veth, monkeypatch, capsys):
    ethtool = shutil.which('ethtool')
    fixed = _real(monkeypatch, capsys, {'interface': veth, 'features': {'tx-checksum-ipv4': True}})
    assert fixed['failed'] is True
    assert fixed['msg'] == ('interface {0}: fixed by the driver, cannot change: tx-checksum-ipv4 (is off, asked on); '
                            'set ignore_fixed to skip them'.format(veth))

    tso = _real(monkeypatch, capsys, {'interface': veth, 'features': {'tso': False, 'tx-tcp6-segmentation': True}})
    assert tso['changed'] is True, tso
    after = _sh([ethtool, '-k', veth])
    assert '\ttx-tcp-segmentation: off\n' in after
    assert '\ttx-tcp6-segmentation: on\n' in after
    again = _real(monkeypatch, capsys, {'interface': veth, 'features': {'tso': False, 'tx-tcp6-segmentation': True}})
    assert again['changed'] is False, again
