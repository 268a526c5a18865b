# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
# Pure functions for ethtool's text output:
#
# * parse_ethtool_k() / parse_features(): ``ethtool -k IFACE``
# * parse_ethtool_i(): ``ethtool -i IFACE``
#
# The feature names (legacy flags, what a name a user gives means, NetworkManager's and .link's names) are
# parsers/_ethtool_names.py; what ``ethtool -K`` must do is rules/_nic_offload.py.  No Ansible import: nic_facts,
# nic_offload, gpu_node_facts and the ethtool_features filter all share this file. Errors are raised as EthtoolError
# subclasses.

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


_HEADER_RE = re.compile(r'^Features for (?P<ifname>\S+):$')
_FEATURE_RE = re.compile(
    r'^(?P<name>[A-Za-z0-9_.-]+): (?P<state>on|off)'
    r'(?: \[(?P<suffix>fixed|requested on|requested off)\])?$')
_STATES = {'on': True, 'off': False}


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
