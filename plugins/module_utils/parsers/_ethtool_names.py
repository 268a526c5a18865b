# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""ethtool's feature names: the twelve legacy flags (off_flag_def: short name, long name, kernel pattern), how a
name a user gives (``gro``, ``generic-receive-offload``, ``rx-gro``, ``tx-checksum-ipv4``...) maps to what a device
prints, and the names NetworkManager (``ethtool.feature-*``) and systemd .link files give the same features.

How ethtool prints features (netlink/features.c, and ethtool.c before it): the twelve "legacy flags" come first. A
legacy flag that matches exactly one kernel feature is printed under its long name with that feature's state
(``generic-receive-offload: on``). One that matches several is printed as a group line with no suffix, ``on`` when
any member is on, followed by the members indented with a tab. Then every other kernel feature under its kernel name.
``ethtool -K`` takes a legacy flag's short or long name (long names since ethtool 5.7; short ones always) and every
kernel feature name.  Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from collections import OrderedDict

# ethtool's off_flag_def: (short name, long name, kernel feature name or
# pattern with one '*'). ufo is kept for name resolution, but no kernel that
# has the netlink interface prints it.
LEGACY_FLAGS = (
    ('rx', 'rx-checksumming', 'rx-checksum'),
    ('tx', 'tx-checksumming', 'tx-checksum-*'),
    ('sg', 'scatter-gather', 'tx-scatter-gather*'),
    ('tso', 'tcp-segmentation-offload', 'tx-tcp*-segmentation'),
    ('ufo', 'udp-fragmentation-offload', 'tx-udp-fragmentation'),
    ('gso', 'generic-segmentation-offload', 'tx-generic-segmentation'),
    ('gro', 'generic-receive-offload', 'rx-gro'),
    ('lro', 'large-receive-offload', 'rx-lro'),
    ('rxvlan', 'rx-vlan-offload', 'rx-vlan-hw-parse'),
    ('txvlan', 'tx-vlan-offload', 'tx-vlan-hw-insert'),
    ('ntuple', 'ntuple-filters', 'rx-ntuple-filter'),
    ('rxhash', 'receive-hashing', 'rx-hashing'),
)

SHORT_BY_LONG = dict((flag[1], flag[0]) for flag in LEGACY_FLAGS)


def kernel_pattern_match(name, pattern):
    """True when ``name`` matches an off_flag_def kernel pattern (one ``*`` at most)."""
    if '*' not in pattern:
        return name == pattern
    head, tail = pattern.split('*', 1)
    return (len(name) >= len(head) + len(tail) and name.startswith(head)
            and name.endswith(tail))


def _legacy_for(name):
    """The off_flag_def row whose short name, long name or exact kernel name is ``name``."""
    for flag in LEGACY_FLAGS:
        if name in (flag[0], flag[1]) or ('*' not in flag[2] and name == flag[2]):
            return flag
    return None


def resolve_feature(name, parsed):
    """Map a user's feature name to what ``parsed`` (from parse_ethtool_k) shows.

    Returns ``(target, members, flag)``: ``target`` is the printed name, ``members``
    the printed names the setting acts on (the group members for a group line,
    else ``[target]``) and ``flag`` the name to pass to ``ethtool -K`` (the short
    name for legacy flags, else the kernel name). Returns None when the device
    has no such feature.
    """
    features = parsed['features']
    groups = parsed['groups']
    legacy = _legacy_for(name)
    if legacy is not None:
        target = legacy[1]
        if target not in features:
            return None
        return target, list(groups.get(target, [target])), legacy[0]
    if name in features:
        if name in groups:
            # a group line's own name is a legacy long name, handled above
            return name, list(groups[name]), SHORT_BY_LONG.get(name, name)
        return name, [name], SHORT_BY_LONG.get(name, name)
    # a kernel name hidden behind a legacy flag that matched only this feature
    for short, long_name, pattern in LEGACY_FLAGS:
        if kernel_pattern_match(name, pattern) and long_name in features and long_name not in groups:
            return long_name, [long_name], short
    return None


def known_names(parsed):
    """Names this device accepts: the printed ones, then the legacy short names."""
    names = list(parsed['features'])
    shorts = [flag[0] for flag in LEGACY_FLAGS if flag[1] in parsed['features']]
    return names, shorts


def _onoff(value):
    return 'on' if value else 'off'


# NetworkManager's ethtool feature properties (libnm NM_ETHTOOL_OPTNAME_FEATURE_*):
# legacy flags by short name, everything else by kernel name.
_NM_FEATURES = frozenset((
    'esp-hw-offload', 'esp-tx-csum-hw-offload', 'fcoe-mtu', 'gro', 'gso', 'highdma', 'hw-tc-offload',
    'l2-fwd-offload', 'loopback', 'lro', 'macsec-hw-offload', 'ntuple', 'rx', 'rx-all', 'rx-fcs',
    'rx-gro-hw', 'rx-gro-list', 'rx-udp-gro-forwarding', 'rx-udp_tunnel-port-offload', 'rx-vlan-filter',
    'rx-vlan-stag-filter', 'rx-vlan-stag-hw-parse', 'rxhash', 'rxvlan', 'sg', 'tls-hw-record',
    'tls-hw-rx-offload', 'tls-hw-tx-offload', 'tso', 'tx', 'tx-checksum-fcoe-crc',
    'tx-checksum-ip-generic', 'tx-checksum-ipv4', 'tx-checksum-ipv6', 'tx-checksum-sctp',
    'tx-esp-segmentation', 'tx-fcoe-segmentation', 'tx-gre-csum-segmentation', 'tx-gre-segmentation',
    'tx-gso-list', 'tx-gso-partial', 'tx-gso-robust', 'tx-ipxip4-segmentation', 'tx-ipxip6-segmentation',
    'tx-nocache-copy', 'tx-scatter-gather', 'tx-scatter-gather-fraglist', 'tx-sctp-segmentation',
    'tx-tcp-ecn-segmentation', 'tx-tcp-mangleid-segmentation', 'tx-tcp-segmentation',
    'tx-tcp6-segmentation', 'tx-tunnel-remcsum-segmentation', 'tx-udp-segmentation',
    'tx-udp_tnl-csum-segmentation', 'tx-udp_tnl-segmentation', 'txvlan', 'tx-vlan-stag-hw-insert',
))

# systemd.link(5) [Link] offload keys, by the name ethtool -k prints.
_LINK_KEYS = {
    'rx-checksumming': 'ReceiveChecksumOffload',
    'tx-checksumming': 'TransmitChecksumOffload',
    'tx-tcp-segmentation': 'TCPSegmentationOffload',
    'tx-tcp6-segmentation': 'TCP6SegmentationOffload',
    'generic-segmentation-offload': 'GenericSegmentationOffload',
    'generic-receive-offload': 'GenericReceiveOffload',
    'rx-gro-hw': 'GenericReceiveOffloadHardware',
    'large-receive-offload': 'LargeReceiveOffload',
    'rx-vlan-offload': 'ReceiveVLANCTAGHardwareAcceleration',
    'tx-vlan-offload': 'TransmitVLANCTAGHardwareAcceleration',
    'rx-vlan-filter': 'ReceiveVLANCTAGFilter',
    'tx-vlan-stag-hw-insert': 'TransmitVLANSTAGHardwareAcceleration',
    'ntuple-filters': 'NTupleFilter',
    'tx-gso-partial': 'PartialGenericSegmentationOffload',
}


def persistence_names(requests):
    """What would make the requested features survive a reboot.

    ``requests`` is plan_feature_changes()'s ``requests``. Returns a dict with
    ``nm_properties`` (``{"ethtool.feature-gro": "off"}``, for ``nmcli connection
    modify``), ``nm_unsupported`` (printed names NetworkManager has no property
    for), ``link_keys`` (``{"GenericReceiveOffload": "false"}`` for a
    systemd ``.link`` file) and ``link_unsupported``.
    """
    nm_properties = OrderedDict()
    nm_unsupported = []
    link_keys = OrderedDict()
    link_unsupported = []
    for name, req in requests.items():
        target = req['target']
        nm_name = SHORT_BY_LONG.get(target, target)
        if nm_name in _NM_FEATURES:
            nm_properties['ethtool.feature-' + nm_name] = _onoff(req['value'])
        elif target not in nm_unsupported:
            nm_unsupported.append(target)
        if target in _LINK_KEYS:
            link_keys[_LINK_KEYS[target]] = 'true' if req['value'] else 'false'
        elif target not in link_unsupported:
            link_unsupported.append(target)
    return {
        'nm_properties': nm_properties,
        'nm_unsupported': nm_unsupported,
        'link_keys': link_keys,
        'link_unsupported': link_unsupported,
    }
