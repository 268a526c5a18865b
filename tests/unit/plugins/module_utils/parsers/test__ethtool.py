# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import (
    EthtoolFeatureError,
    EthtoolParseError,
    parse_ethtool_i,
    parse_ethtool_k,
    parse_features,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool_names import (
    kernel_pattern_match,
    persistence_names,
    resolve_feature,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nic_offload import (
    plan_feature_changes,
    verify_features,
)

ETHTOOL_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '..', '..', '..', 'fixtures', 'ethtool')
LO_K = 'loopback-lo_ethtool-k_hotsos.txt'
VIRTIO_K = 'virtio_net-ens3_ethtool-k_hotsos.txt'
# blog copy: every line carries an 8-space markdown indent (see tests/fixtures/SOURCES.md)
MLX5_K = 'mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-k_xtremeownage-blog.txt'


def read_fixture(name):
    with open(os.path.join(ETHTOOL_DIR, name)) as handle:
        return handle.read()


def strip_mlx5_indent(text):
    """Undo the blog's markdown indent: 8 spaces off every line."""
    lines = text.split('\n')
    assert all(line.startswith(' ' * 8) for line in lines if line)
    return '\n'.join(line[8:] for line in lines)


# ---------------------------------------------------------------------------
# ethtool -k on the real captures


@pytest.mark.parametrize('fixture, interface, count, fixed, enabled, groups', [
    (LO_K, 'lo', 56, 48, 20, {
        'tx-checksumming': ['tx-checksum-ipv4', 'tx-checksum-ip-generic', 'tx-checksum-ipv6',
                            'tx-checksum-fcoe-crc', 'tx-checksum-sctp'],
        'scatter-gather': ['tx-scatter-gather', 'tx-scatter-gather-fraglist'],
        'tcp-segmentation-offload': ['tx-tcp-segmentation', 'tx-tcp-ecn-segmentation',
                                     'tx-tcp-mangleid-segmentation', 'tx-tcp6-segmentation'],
    }),
    (VIRTIO_K, 'ens3', 56, 43, 15, {
        'tx-checksumming': ['tx-checksum-ipv4', 'tx-checksum-ip-generic', 'tx-checksum-ipv6',
                            'tx-checksum-fcoe-crc', 'tx-checksum-sctp'],
        'scatter-gather': ['tx-scatter-gather', 'tx-scatter-gather-fraglist'],
        'tcp-segmentation-offload': ['tx-tcp-segmentation', 'tx-tcp-ecn-segmentation',
                                     'tx-tcp-mangleid-segmentation', 'tx-tcp6-segmentation'],
    }),
    (MLX5_K, 'enp1s0f0np0', 65, 33, 25, {
        'tx-checksumming': ['tx-checksum-ipv4', 'tx-checksum-ip-generic', 'tx-checksum-ipv6',
                            'tx-checksum-fcoe-crc', 'tx-checksum-sctp'],
        'scatter-gather': ['tx-scatter-gather', 'tx-scatter-gather-fraglist'],
        'tcp-segmentation-offload': ['tx-tcp-segmentation', 'tx-tcp-ecn-segmentation',
                                     'tx-tcp-mangleid-segmentation', 'tx-tcp6-segmentation'],
    }),
])
def test_parse_ethtool_k_fixtures(fixture, interface, count, fixed, enabled, groups):
    text = read_fixture(fixture)
    if fixture == MLX5_K:
        text = strip_mlx5_indent(text)
    parsed = parse_ethtool_k(text)
    assert parsed['interface'] == interface
    assert len(parsed['features']) == count
    assert sum(1 for v in parsed['features'].values() if v['fixed']) == fixed
    assert sum(1 for v in parsed['features'].values() if v['enabled']) == enabled
    assert dict(parsed['groups']) == groups


@pytest.mark.parametrize('fixture, name, expected', [
    (LO_K, 'rx-checksumming', {'enabled': True, 'fixed': True}),
    # group line, every member fixed: fixed is derived
    (LO_K, 'tx-checksumming', {'enabled': True, 'fixed': True}),
    (LO_K, 'tcp-segmentation-offload', {'enabled': True, 'fixed': False}),
    (LO_K, 'tx-checksum-ip-generic', {'enabled': True, 'fixed': True}),
    (LO_K, 'generic-receive-offload', {'enabled': True, 'fixed': False}),
    (LO_K, 'tls-hw-record', {'enabled': False, 'fixed': True}),
    (VIRTIO_K, 'rx-gro-hw', {'enabled': True, 'fixed': False}),
    (VIRTIO_K, 'tx-gso-robust', {'enabled': True, 'fixed': True}),
    (VIRTIO_K, 'tx-checksumming', {'enabled': True, 'fixed': False}),
    (MLX5_K, 'large-receive-offload', {'enabled': False, 'fixed': False}),
    (MLX5_K, 'macsec-hw-offload', {'enabled': True, 'fixed': False}),
    (MLX5_K, 'rx-vlan-stag-filter', {'enabled': True, 'fixed': True}),
    (MLX5_K, 'hsr-dup-offload', {'enabled': False, 'fixed': True}),
    (MLX5_K, 'tx-tcp-mangleid-segmentation', {'enabled': False, 'fixed': False}),
])
def test_parse_features_values(fixture, name, expected):
    text = read_fixture(fixture)
    if fixture == MLX5_K:
        text = strip_mlx5_indent(text)
    assert parse_features(text)[name] == expected


def test_mlx5_indent_tolerated():
    """The blog copy has 8 extra spaces on every line: parsed as is or stripped, same result."""
    raw = read_fixture(MLX5_K)
    assert raw.startswith('        Features for enp1s0f0np0:')
    assert parse_ethtool_k(raw) == parse_ethtool_k(strip_mlx5_indent(raw))


def test_parse_features_keeps_printed_order():
    names = list(parse_features(read_fixture(LO_K)))
    assert names[:4] == ['rx-checksumming', 'tx-checksumming', 'tx-checksum-ipv4', 'tx-checksum-ip-generic']
    assert names[-1] == 'tls-hw-record'


@pytest.mark.parametrize('text, expected', [
    ('Features for veth0:\nrx-gro-hw: off [requested on]\n',
     {'rx-gro-hw': {'enabled': False, 'fixed': False, 'requested': True}}),
    ('Features for veth0:\ngeneric-receive-offload: on [requested off]\n',
     {'generic-receive-offload': {'enabled': True, 'fixed': False, 'requested': False}}),
    # no header (output trimmed by a caller), CRLF line ends, trailing blanks
    ('highdma: on [fixed]\r\nloopback: off   \r\n\r\n',
     {'highdma': {'enabled': True, 'fixed': True}, 'loopback': {'enabled': False, 'fixed': False}}),
    # a group with one changeable member is not fixed
    ('Features for x:\ntx-checksumming: off\n\ttx-checksum-ipv4: off [fixed]\n\ttx-checksum-sctp: off\n',
     {'tx-checksumming': {'enabled': False, 'fixed': False},
      'tx-checksum-ipv4': {'enabled': False, 'fixed': True},
      'tx-checksum-sctp': {'enabled': False, 'fixed': False}}),
])
def test_parse_features_suffixes(text, expected):
    assert dict(parse_features(text)) == expected


@pytest.mark.parametrize('text, message', [
    ('', 'ethtool -k output is empty'),
    ('  \n\n', 'ethtool -k output is empty'),
    ('Features for eth0:\n', 'ethtool -k output has a header but no feature lines'),
    ('Cannot get device feature names: No such device\n',
     "ethtool -k output line 1: cannot parse 'Cannot get device feature names: No such device'; expected "
     "'name: on|off' optionally followed by [fixed], [requested on] or [requested off]"),
    ('Features for eth0:\ngro: maybe\n',
     "ethtool -k output line 2: cannot parse 'gro: maybe'; expected 'name: on|off' optionally followed by "
     "[fixed], [requested on] or [requested off]"),
    ('Features for eth0:\nhighdma: on [broken]\n',
     "ethtool -k output line 2: cannot parse 'highdma: on [broken]'; expected 'name: on|off' optionally "
     "followed by [fixed], [requested on] or [requested off]"),
    ('Features for eth0:\n\ttx-checksum-ipv4: on\n',
     "ethtool -k output line 2: indented feature 'tx-checksum-ipv4' has no group line above it"),
    ('  Features for eth0:\nhighdma: on\n',
     "ethtool -k output line 2: 'highdma: on' is indented less than the first line"),
    ('Features for eth0:\nhighdma: on\nhighdma: off\n',
     "ethtool -k output line 3: feature 'highdma' appears twice"),
    ('Features for eth0:\nhighdma: on\nFeatures for eth1:\n',
     "ethtool -k output line 3: a second header 'Features for eth1:'; expected the features of one interface"),
])
def test_parse_ethtool_k_errors(text, message):
    with pytest.raises(EthtoolParseError) as exc:
        parse_ethtool_k(text)
    assert str(exc.value) == message


# ---------------------------------------------------------------------------
# ethtool -i

_SUPPORTS_NONE = {
    'supports_statistics': True, 'supports_test': False, 'supports_eeprom_access': False,
    'supports_register_dump': False, 'supports_priv_flags': False,
}


def _i(driver, version, firmware, rom, bus, **supports):
    result = {'driver': driver, 'version': version, 'firmware_version': firmware,
              'expansion_rom_version': rom, 'bus_info': bus}
    result.update(_SUPPORTS_NONE)
    result.update(supports)
    return result


@pytest.mark.parametrize('fixture, expected', [
    ('aws-ena-eth0_ethtool-i_awsdocs.txt', _i('ena', '1.5.0g', None, None, '0000:00:05.0')),
    ('aws-ixgbevf-eth0_ethtool-i_awsdocs.txt',
     _i('ixgbevf', '4.0.3', 'N/A', None, '0000:00:03.0', supports_test=True, supports_register_dump=True)),
    ('aws-xen-vif-eth0_ethtool-i_awsdocs.txt', _i('vif', None, None, None, 'vif-0')),
    ('mellanox-connectx4-mlx5_core_ethtool-i_xtremeownage-blog.txt',
     _i('mlx5_core', '6.8.12-4-pve', '12.28.2006 (MT_2150110033)', None, '0000:81:00.0',
        supports_test=True, supports_priv_flags=True)),
    ('mellanox-connectx4lx-mlx5_core-enp1s0f0np0_ethtool-i_xtremeownage-blog.txt',
     _i('mlx5_core', '6.8.12-8-pve', '14.32.1900 (MT_2420110034)', None, '0000:01:00.0',
        supports_test=True, supports_priv_flags=True)),
    ('virtio_net-ens3_ethtool-i_hotsos.txt', _i('virtio_net', '1.0.0', None, None, '0000:00:03.0')),
])
def test_parse_ethtool_i_fixtures(fixture, expected):
    assert parse_ethtool_i(read_fixture(fixture)) == expected


def test_parse_ethtool_i_e1000e_without_upstream_comment():
    """The node_exporter copy starts with a '# ethtool -i eth0' comment that ethtool never prints."""
    text = read_fixture('intel-e1000e-eth0_ethtool-i_node_exporter.txt')
    first, rest = text.split('\n', 1)
    assert first == '# ethtool -i eth0'
    assert parse_ethtool_i(rest) == _i('e1000e', '5.11.0-22-generic', '0.5-4', None, '0000:00:1f.6',
                                       supports_test=True, supports_eeprom_access=True,
                                       supports_register_dump=True, supports_priv_flags=True)
    with pytest.raises(EthtoolParseError) as exc:
        parse_ethtool_i(text)
    assert str(exc.value) == "ethtool -i output line 1: cannot parse '# ethtool -i eth0'; expected 'key: value'"


def test_parse_ethtool_i_keeps_unknown_keys():
    assert parse_ethtool_i('  driver: veth\n  bus-info:\n  new-field: x\n') == {
        'driver': 'veth', 'version': None, 'firmware_version': None, 'expansion_rom_version': None,
        'bus_info': None, 'new_field': 'x'}


@pytest.mark.parametrize('text, message', [
    ('', 'ethtool -i output is empty'),
    (read_fixture('loopback-lo_ethtool-i-unsupported_hotsos.txt'),
     "ethtool -i output line 1: cannot parse 'Cannot get driver information: Operation not supported'; "
     "expected 'key: value'"),
    ('version: 1.0\nbus-info: 0000:00:03.0\n',
     "ethtool -i output has no 'driver:' line; first line: 'version: 1.0'"),
    ('driver: veth\nsupports-test: maybe\n',
     "ethtool -i output line 2: supports-test is 'maybe'; expected 'yes' or 'no'"),
])
def test_parse_ethtool_i_errors(text, message):
    with pytest.raises(EthtoolParseError) as exc:
        parse_ethtool_i(text)
    assert str(exc.value) == message


# ---------------------------------------------------------------------------
# names


@pytest.mark.parametrize('name, pattern, expected', [
    ('tx-checksum-ipv4', 'tx-checksum-*', True),
    ('tx-checksumming', 'tx-checksum-*', False),
    ('tx-tcp6-segmentation', 'tx-tcp*-segmentation', True),
    ('tx-tcp-segmentation', 'tx-tcp*-segmentation', True),
    ('tx-udp-segmentation', 'tx-tcp*-segmentation', False),
    ('tx-scatter-gather', 'tx-scatter-gather*', True),
    ('rx-gro', 'rx-gro', True),
    ('rx-gro-hw', 'rx-gro', False),
])
def test_kernel_pattern_match(name, pattern, expected):
    assert kernel_pattern_match(name, pattern) is expected


@pytest.mark.parametrize('name, expected', [
    ('gro', ('generic-receive-offload', ['generic-receive-offload'], 'gro')),
    ('generic-receive-offload', ('generic-receive-offload', ['generic-receive-offload'], 'gro')),
    ('rx-gro', ('generic-receive-offload', ['generic-receive-offload'], 'gro')),
    ('lro', ('large-receive-offload', ['large-receive-offload'], 'lro')),
    ('rx-lro', ('large-receive-offload', ['large-receive-offload'], 'lro')),
    ('rx', ('rx-checksumming', ['rx-checksumming'], 'rx')),
    ('rx-checksum', ('rx-checksumming', ['rx-checksumming'], 'rx')),
    ('gso', ('generic-segmentation-offload', ['generic-segmentation-offload'], 'gso')),
    ('rxvlan', ('rx-vlan-offload', ['rx-vlan-offload'], 'rxvlan')),
    ('rx-vlan-hw-parse', ('rx-vlan-offload', ['rx-vlan-offload'], 'rxvlan')),
    ('txvlan', ('tx-vlan-offload', ['tx-vlan-offload'], 'txvlan')),
    ('ntuple', ('ntuple-filters', ['ntuple-filters'], 'ntuple')),
    ('rxhash', ('receive-hashing', ['receive-hashing'], 'rxhash')),
    ('rx-hashing', ('receive-hashing', ['receive-hashing'], 'rxhash')),
    ('tx', ('tx-checksumming', ['tx-checksum-ipv4', 'tx-checksum-ip-generic', 'tx-checksum-ipv6',
                                'tx-checksum-fcoe-crc', 'tx-checksum-sctp'], 'tx')),
    ('sg', ('scatter-gather', ['tx-scatter-gather', 'tx-scatter-gather-fraglist'], 'sg')),
    ('tso', ('tcp-segmentation-offload', ['tx-tcp-segmentation', 'tx-tcp-ecn-segmentation',
                                          'tx-tcp-mangleid-segmentation', 'tx-tcp6-segmentation'], 'tso')),
    ('tx-tcp6-segmentation', ('tx-tcp6-segmentation', ['tx-tcp6-segmentation'], 'tx-tcp6-segmentation')),
    ('rx-gro-hw', ('rx-gro-hw', ['rx-gro-hw'], 'rx-gro-hw')),
    ('highdma', ('highdma', ['highdma'], 'highdma')),
    ('rdma-offload', None),
    ('ufo', None),
    ('udp-fragmentation-offload', None),
])
def test_resolve_feature_mlx5(name, expected):
    parsed = parse_ethtool_k(strip_mlx5_indent(read_fixture(MLX5_K)))
    assert resolve_feature(name, parsed) == expected


def test_resolve_feature_group_with_one_member():
    """When a legacy pattern matches one kernel feature, ethtool prints it under the long name."""
    parsed = parse_ethtool_k('Features for x:\nscatter-gather: on\nhighdma: on\n')
    assert resolve_feature('tx-scatter-gather', parsed) == ('scatter-gather', ['scatter-gather'], 'sg')
    assert resolve_feature('sg', parsed) == ('scatter-gather', ['scatter-gather'], 'sg')


# ---------------------------------------------------------------------------
# plan_feature_changes

_PLAN_OK = [
    # (fixture, wanted, ignore_fixed, args, changes, skipped)
    ('mlx5 gro off', MLX5_K, {'gro': False}, False,
     ['gro', 'off'], {'generic-receive-offload': {'before': True, 'after': False}}, []),
    ('mlx5 long name, same result', MLX5_K, {'generic-receive-offload': False}, False,
     ['gro', 'off'], {'generic-receive-offload': {'before': True, 'after': False}}, []),
    ('mlx5 kernel name, same result', MLX5_K, {'rx-gro': False}, False,
     ['gro', 'off'], {'generic-receive-offload': {'before': True, 'after': False}}, []),
    ('mlx5 already right: nothing to run', MLX5_K, {'lro': False, 'gro': True, 'highdma': True}, False,
     [], {}, []),
    ('mlx5 several, sorted by name', MLX5_K, {'rxvlan': False, 'lro': True, 'gro': False, 'ntuple': True}, False,
     ['gro', 'off', 'lro', 'on', 'ntuple', 'on', 'rxvlan', 'off'],
     {'large-receive-offload': {'before': False, 'after': True},
      'generic-receive-offload': {'before': True, 'after': False},
      'ntuple-filters': {'before': False, 'after': True},
      'rx-vlan-offload': {'before': True, 'after': False}}, []),
    ('mlx5 tso off: changeable members only', MLX5_K, {'tso': False}, False,
     ['tso', 'off'],
     {'tx-tcp-segmentation': {'before': True, 'after': False},
      'tx-tcp6-segmentation': {'before': True, 'after': False}}, []),
    ('mlx5 tso off except IPv6: member overrides group', MLX5_K,
     {'tso': False, 'tx-tcp6-segmentation': True}, False,
     ['tso', 'off', 'tx-tcp6-segmentation', 'on'],
     {'tx-tcp-segmentation': {'before': True, 'after': False}}, []),
    ('mlx5 tso on: mangleid is the one off', MLX5_K, {'tso': True}, False,
     ['tso', 'on'], {'tx-tcp-mangleid-segmentation': {'before': False, 'after': True}}, []),
    ('mlx5 tx off: fixed members are left', MLX5_K, {'tx': False}, False,
     ['tx', 'off'], {'tx-checksum-ip-generic': {'before': True, 'after': False}}, []),
    ('mlx5 member on its own', MLX5_K, {'tx-checksum-ip-generic': False}, False,
     ['tx-checksum-ip-generic', 'off'], {'tx-checksum-ip-generic': {'before': True, 'after': False}}, []),
    ('mlx5 fixed, already right', MLX5_K, {'highdma': True, 'rx-gro-hw': False}, False, [], {}, []),
    ('mlx5 fixed skipped', MLX5_K, {'highdma': False, 'rx-gro-hw': True, 'gro': False}, True,
     ['gro', 'off'], {'generic-receive-offload': {'before': True, 'after': False}}, ['highdma', 'rx-gro-hw']),
    ('lo tx on: every member fixed, and already on', LO_K, {'tx': True}, False, [], {}, []),
    ('lo tx off: every member fixed, skipped', LO_K, {'tx': False}, True, [], {}, ['tx-checksumming']),
    ('virtio rx-gro-hw off', VIRTIO_K, {'rx-gro-hw': False}, False,
     ['rx-gro-hw', 'off'], {'rx-gro-hw': {'before': True, 'after': False}}, []),
]


@pytest.mark.parametrize('fixture, wanted, ignore_fixed, args, changes, skipped',
                         [case[1:] for case in _PLAN_OK], ids=[case[0] for case in _PLAN_OK])
def test_plan_feature_changes(fixture, wanted, ignore_fixed, args, changes, skipped):
    text = read_fixture(fixture)
    parsed = parse_ethtool_k(text)
    plan = plan_feature_changes(parsed, wanted, ignore_fixed=ignore_fixed, ifname='x')
    assert plan['args'] == args
    assert dict(plan['changes']) == changes
    assert plan['skipped_fixed'] == skipped


_MLX5_NAMES = (
    'rx-checksumming, tx-checksumming, tx-checksum-ipv4, tx-checksum-ip-generic, tx-checksum-ipv6, '
    'tx-checksum-fcoe-crc, tx-checksum-sctp, scatter-gather, tx-scatter-gather, tx-scatter-gather-fraglist, '
    'tcp-segmentation-offload, tx-tcp-segmentation, tx-tcp-ecn-segmentation, tx-tcp-mangleid-segmentation, '
    'tx-tcp6-segmentation, generic-segmentation-offload, generic-receive-offload, large-receive-offload, '
    'rx-vlan-offload, tx-vlan-offload, ntuple-filters, receive-hashing, highdma, rx-vlan-filter, '
    'vlan-challenged, tx-lockless, netns-local, tx-gso-robust, tx-fcoe-segmentation, tx-gre-segmentation, '
    'tx-gre-csum-segmentation, tx-ipxip4-segmentation, tx-ipxip6-segmentation, tx-udp_tnl-segmentation, '
    'tx-udp_tnl-csum-segmentation, tx-gso-partial, tx-tunnel-remcsum-segmentation, tx-sctp-segmentation, '
    'tx-esp-segmentation, tx-udp-segmentation, tx-gso-list, fcoe-mtu, tx-nocache-copy, loopback, rx-fcs, '
    'rx-all, tx-vlan-stag-hw-insert, rx-vlan-stag-hw-parse, rx-vlan-stag-filter, l2-fwd-offload, '
    'hw-tc-offload, esp-hw-offload, esp-tx-csum-hw-offload, rx-udp_tunnel-port-offload, tls-hw-tx-offload, '
    'tls-hw-rx-offload, rx-gro-hw, tls-hw-record, rx-gro-list, macsec-hw-offload, rx-udp-gro-forwarding, '
    'hsr-tag-ins-offload, hsr-tag-rm-offload, hsr-fwd-offload, hsr-dup-offload'
)
_SHORTS = 'rx, tx, sg, tso, gso, gro, lro, rxvlan, txvlan, ntuple, rxhash'

_PLAN_ERRORS = [
    ('the article\'s rdma-offload', MLX5_K, {'rdma-offload': False}, False,
     "interface x: unknown feature 'rdma-offload'; the features this device has are: " + _MLX5_NAMES
     + '; ethtool -K also takes the short names: ' + _SHORTS),
    ('two unknown, sorted', MLX5_K, {'rdma-offload': False, 'ufo': False, 'gro': False}, False,
     "interface x: unknown feature 'rdma-offload', 'ufo'; the features this device has are: " + _MLX5_NAMES
     + '; ethtool -K also takes the short names: ' + _SHORTS),
    ('fixed asked to change', MLX5_K, {'highdma': False}, False,
     'interface x: fixed by the driver, cannot change: highdma (is on, asked off); set ignore_fixed to skip them'),
    ('fixed, named by alias', MLX5_K, {'gro': False, 'rx-gro-hw': True, 'tx-checksum-ipv4': True}, False,
     'interface x: fixed by the driver, cannot change: rx-gro-hw (is off, asked on), tx-checksum-ipv4 '
     '(is off, asked on); set ignore_fixed to skip them'),
    ('fixed group', LO_K, {'sg': False}, False,
     'interface x: fixed by the driver, cannot change: scatter-gather [sg] (is on, asked off); '
     'set ignore_fixed to skip them'),
    ('one feature, two names, two values', MLX5_K, {'gro': False, 'generic-receive-offload': True}, False,
     "interface x: features 'generic-receive-offload' and 'gro' both name generic-receive-offload but ask "
     "for on and off"),
]


@pytest.mark.parametrize('fixture, wanted, ignore_fixed, message',
                         [case[1:] for case in _PLAN_ERRORS], ids=[case[0] for case in _PLAN_ERRORS])
def test_plan_feature_changes_errors(fixture, wanted, ignore_fixed, message):
    parsed = parse_ethtool_k(read_fixture(fixture))
    with pytest.raises(EthtoolFeatureError) as exc:
        plan_feature_changes(parsed, wanted, ignore_fixed=ignore_fixed, ifname='x')
    assert str(exc.value) == message


@pytest.mark.parametrize('after, wanted, missed', [
    ('generic-receive-offload: off\n', {'generic-receive-offload': False}, []),
    ('generic-receive-offload: on\n', {'generic-receive-offload': False},
     ['generic-receive-offload (is on, asked off)']),
    ('rx-gro-hw: off [requested on]\n', {'rx-gro-hw': True}, ['rx-gro-hw (is off, asked on)']),
    ('highdma: on\n', {'rx-gro-hw': True}, ['rx-gro-hw (gone from ethtool -k)']),
])
def test_verify_features(after, wanted, missed):
    assert verify_features(parse_ethtool_k(after), wanted) == missed


def test_persistence_names():
    parsed = parse_ethtool_k(read_fixture(MLX5_K))
    plan = plan_feature_changes(parsed, {'gro': False, 'rx-lro': False, 'tso': False, 'hsr-fwd-offload': False,
                                         'tx-tcp6-segmentation': True, 'rx-gro-hw': False})
    assert persistence_names(plan['requests']) == {
        'nm_properties': {
            'ethtool.feature-gro': 'off',
            'ethtool.feature-tso': 'off',
            'ethtool.feature-lro': 'off',
            'ethtool.feature-rx-gro-hw': 'off',
            'ethtool.feature-tx-tcp6-segmentation': 'on',
        },
        'nm_unsupported': ['hsr-fwd-offload'],
        'link_keys': {
            'GenericReceiveOffload': 'false',
            'LargeReceiveOffload': 'false',
            'GenericReceiveOffloadHardware': 'false',
            'TCP6SegmentationOffload': 'true',
        },
        'link_unsupported': ['hsr-fwd-offload', 'tcp-segmentation-offload'],
    }
