# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice; do not import it
# from other collections or from playbooks.
#
# Pure functions for ethtool's text output and feature names:
#
# * parse_ethtool_k() / parse_features(): ``ethtool -k IFACE``
# * parse_ethtool_i(): ``ethtool -i IFACE``
# * resolve_feature() / plan_feature_changes(): map the names a user gives
#   (``gro``, ``generic-receive-offload``, ``rx-gro``, ``tx-checksum-ipv4``...)
#   to what the device prints, and work out the ``ethtool -K`` arguments.
#
# No Ansible import: nic_facts, nic_offload and the ethtool_features filter all
# share this file. Errors are raised as EthtoolError subclasses.
#
# How ethtool prints features (netlink/features.c, and ethtool.c before it):
# the twelve "legacy flags" come first. A legacy flag that matches exactly one
# kernel feature is printed under its long name with that feature's state
# (``generic-receive-offload: on``). One that matches several is printed as a
# group line with no suffix, ``on`` when any member is on, followed by the
# members indented with a tab. Then every other kernel feature under its kernel
# name. ``ethtool -K`` takes a legacy flag's short or long name (long names
# since ethtool 5.7; short ones always) and every kernel feature name.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re
from collections import OrderedDict


class EthtoolError(Exception):
    """Base class of the errors raised here."""


class EthtoolParseError(EthtoolError):
    """The text is not what ``ethtool -k`` / ``ethtool -i`` prints."""


class EthtoolFeatureError(EthtoolError):
    """A feature asked for is unknown on the device, fixed, or asked twice."""


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

_HEADER_RE = re.compile(r'^Features for (?P<ifname>\S+):$')
_FEATURE_RE = re.compile(
    r'^(?P<name>[A-Za-z0-9_.-]+): (?P<state>on|off)'
    r'(?: \[(?P<suffix>fixed|requested on|requested off)\])?$')
_STATES = {'on': True, 'off': False}


def kernel_pattern_match(name, pattern):
    """True when ``name`` matches an off_flag_def kernel pattern (one ``*`` at most)."""
    if '*' not in pattern:
        return name == pattern
    head, tail = pattern.split('*', 1)
    return (len(name) >= len(head) + len(tail) and name.startswith(head)
            and name.endswith(tail))


def _indent_width(line):
    stripped = line.lstrip(' \t')
    return len(line[:len(line) - len(stripped)].expandtabs(8))


def parse_ethtool_k(text):
    """Parse ``ethtool -k`` output.

    Returns a dict with ``interface`` (the name in the ``Features for`` line, or
    None when that line is absent), ``features`` (an OrderedDict, in printed
    order, of name -> ``{"enabled": bool, "fixed": bool}`` plus ``"requested":
    bool`` when ethtool shows ``[requested on/off]``) and ``groups`` (an
    OrderedDict of group line -> list of its indented member names).

    A group line carries no ``[fixed]`` of its own; its ``fixed`` is true when
    every member is fixed (nothing in the group can change).

    Leading whitespace is handled consistently: the indentation of the first
    non-blank line is the base, lines indented deeper are group members. So a
    copy where every line carries the same extra indent parses the same.
    """
    if text is None or not text.strip():
        raise EthtoolParseError('ethtool -k output is empty')
    interface = None
    features = OrderedDict()
    groups = OrderedDict()
    base = None
    current_top = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        width = _indent_width(line)
        content = line.strip()
        if base is None:
            base = width
        if width < base:
            raise EthtoolParseError(
                'ethtool -k output line {0}: {1!r} is indented less than the first line'.format(number, content))
        header = _HEADER_RE.match(content)
        if header:
            if interface is not None or features:
                raise EthtoolParseError(
                    'ethtool -k output line {0}: a second header {1!r}; expected the features of one '
                    'interface'.format(number, content))
            interface = header.group('ifname')
            continue
        match = _FEATURE_RE.match(content)
        if not match:
            raise EthtoolParseError(
                "ethtool -k output line {0}: cannot parse {1!r}; expected 'name: on|off' optionally "
                "followed by [fixed], [requested on] or [requested off]".format(number, content))
        name = match.group('name')
        if name in features:
            raise EthtoolParseError(
                'ethtool -k output line {0}: feature {1!r} appears twice'.format(number, name))
        suffix = match.group('suffix')
        entry = {'enabled': _STATES[match.group('state')], 'fixed': suffix == 'fixed'}
        if suffix in ('requested on', 'requested off'):
            entry['requested'] = suffix == 'requested on'
        if width > base:
            if current_top is None:
                raise EthtoolParseError(
                    'ethtool -k output line {0}: indented feature {1!r} has no group line '
                    'above it'.format(number, name))
            groups.setdefault(current_top, []).append(name)
        else:
            current_top = name
        features[name] = entry
    if not features:
        raise EthtoolParseError('ethtool -k output has a header but no feature lines')
    for group, members in groups.items():
        features[group]['fixed'] = all(features[m]['fixed'] for m in members)
    return {'interface': interface, 'features': features, 'groups': groups}


def parse_features(text):
    """``ethtool -k`` text -> OrderedDict name -> {enabled, fixed[, requested]}."""
    return parse_ethtool_k(text)['features']


_I_KEYS = {
    'driver': 'driver',
    'version': 'version',
    'firmware-version': 'firmware_version',
    'expansion-rom-version': 'expansion_rom_version',
    'bus-info': 'bus_info',
}


def parse_ethtool_i(text):
    """Parse ``ethtool -i`` output.

    Returns a dict with ``driver``, ``version``, ``firmware_version``,
    ``expansion_rom_version`` and ``bus_info`` (str, or None where ethtool prints
    nothing after the colon or leaves the line out) and the ``supports_*``
    lines as booleans. Other ``key: value`` lines are kept under the key with
    ``-`` replaced by ``_``.
    """
    if text is None or not text.strip():
        raise EthtoolParseError('ethtool -i output is empty')
    result = dict((key, None) for key in _I_KEYS.values())
    seen_driver = False
    for number, raw in enumerate(text.splitlines(), 1):
        content = raw.strip()
        if not content:
            continue
        key, sep, value = content.partition(':')
        key = key.strip()
        value = value.strip()
        if not sep or not key or ' ' in key:
            raise EthtoolParseError(
                "ethtool -i output line {0}: cannot parse {1!r}; expected 'key: value'".format(number, content))
        if key.startswith('supports-'):
            if value not in ('yes', 'no'):
                raise EthtoolParseError(
                    "ethtool -i output line {0}: {1} is {2!r}; expected 'yes' or 'no'".format(number, key, value))
            result[key.replace('-', '_')] = value == 'yes'
            continue
        if key == 'driver':
            seen_driver = True
        result[_I_KEYS.get(key, key.replace('-', '_'))] = value or None
    if not seen_driver:
        raise EthtoolParseError(
            "ethtool -i output has no 'driver:' line; first line: {0!r}".format(text.strip().splitlines()[0].strip()))
    return result


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


def plan_feature_changes(parsed, wanted, ignore_fixed=False, ifname=None):
    """Work out what ``ethtool -K`` must do to reach ``wanted`` (name -> bool).

    Group requests (``tso``, ``tx``, ``sg`` or their long names) set every
    member the driver lets change; a member named on its own overrides its
    group. Returns a dict:

    * ``wanted``: OrderedDict printed leaf name -> bool (what read-back checks)
    * ``changes``: OrderedDict leaf -> ``{"before": bool, "after": bool}``
    * ``skipped_fixed``: leaves or groups that are fixed and were skipped
      (only with ``ignore_fixed``)
    * ``args``: the ``ethtool -K IFACE`` arguments, ``[]`` when nothing changes
    * ``requests``: OrderedDict user name -> ``{"target", "members", "flag", "value"}``

    Raises EthtoolFeatureError for unknown names, two names for one feature
    with different values, and fixed features asked to change (unless
    ``ignore_fixed``).
    """
    where = 'interface {0}: '.format(ifname) if ifname else ''
    features = parsed['features']
    unknown = []
    requests = OrderedDict()
    for name in sorted(wanted):
        resolved = resolve_feature(name, parsed)
        if resolved is None:
            unknown.append(name)
            continue
        target, members, flag = resolved
        requests[name] = {'target': target, 'members': members, 'flag': flag, 'value': bool(wanted[name])}
    if unknown:
        names, shorts = known_names(parsed)
        raise EthtoolFeatureError(
            '{0}unknown feature {1}; the features this device has are: {2}; ethtool -K also takes the '
            'short names: {3}'.format(where, ', '.join(repr(n) for n in unknown), ', '.join(names),
                                      ', '.join(shorts)))
    by_target = {}
    for name, req in requests.items():
        other = by_target.get(req['target'])
        if other is not None and requests[other]['value'] != req['value']:
            raise EthtoolFeatureError(
                "{0}features {1!r} and {2!r} both name {3} but ask for {4} and {5}".format(
                    where, other, name, req['target'], _onoff(requests[other]['value']), _onoff(req['value'])))
        by_target.setdefault(req['target'], name)

    group_reqs = [n for n in requests if requests[n]['target'] in parsed['groups']]
    single_reqs = [n for n in requests if requests[n]['target'] not in parsed['groups']]
    leaf_wanted = OrderedDict()
    owner = {}
    violations = []
    for name in group_reqs:
        req = requests[name]
        members = req['members']
        if all(features[m]['fixed'] for m in members):
            # nothing in the group can change: judge by the group line (on when any member is on)
            if features[req['target']]['enabled'] != req['value']:
                violations.append((name, req['target'], req['value']))
            continue
        for member in members:
            if not features[member]['fixed']:
                leaf_wanted[member] = req['value']
                owner[member] = name
    for name in single_reqs:
        req = requests[name]
        leaf = req['target']
        if features[leaf]['fixed']:
            if features[leaf]['enabled'] != req['value']:
                violations.append((name, leaf, req['value']))
            leaf_wanted.pop(leaf, None)
            continue
        leaf_wanted[leaf] = req['value']
        owner[leaf] = name
    if violations and not ignore_fixed:
        raise EthtoolFeatureError(
            '{0}fixed by the driver, cannot change: {1}; set ignore_fixed to skip them'.format(
                where, ', '.join('{0} (is {1}, asked {2})'.format(
                    target if target == name else '{0} [{1}]'.format(target, name),
                    _onoff(not value), _onoff(value)) for name, target, value in violations)))
    changes = OrderedDict()
    for leaf, value in leaf_wanted.items():
        if features[leaf]['enabled'] != value:
            changes[leaf] = {'before': features[leaf]['enabled'], 'after': value}
    args = []
    set_by_group = {}
    for name in group_reqs:
        req = requests[name]
        if any(m in changes for m in req['members']):
            args.extend([req['flag'], _onoff(req['value'])])
            for member in req['members']:
                set_by_group[member] = req['value']
    for name in single_reqs:
        req = requests[name]
        leaf = req['target']
        if owner.get(leaf) != name:
            continue
        if leaf in set_by_group:
            # a group flag above sets this member too: put it back after it
            needed = set_by_group[leaf] != req['value']
        else:
            needed = leaf in changes
        if needed:
            args.extend([req['flag'], _onoff(req['value'])])
    return {
        'wanted': leaf_wanted,
        'changes': changes,
        'skipped_fixed': [target for name, target, value in violations],
        'args': args,
        'requests': requests,
    }


def verify_features(parsed, wanted):
    """Names in ``wanted`` (leaf -> bool) whose state in ``parsed`` differs, as text; [] when all took."""
    features = parsed['features']
    missed = []
    for leaf, value in wanted.items():
        entry = features.get(leaf)
        if entry is None:
            missed.append('{0} (gone from ethtool -k)'.format(leaf))
        elif entry['enabled'] != value:
            missed.append('{0} (is {1}, asked {2})'.format(leaf, _onoff(entry['enabled']), _onoff(value)))
    return missed


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
