# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The nic_offload decisions: what ``ethtool -K`` must do to reach the wanted features (the nic_offload module and
the role's plan), the read-back check, the boot unit's arguments, and the plan of every selected NIC judged from
``ansible_facts.nics``.

The feature names and ethtool's output are parsers/_ethtool.py.  Pure functions; no Ansible import; Python 3.6
compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import (
    EthtoolError,
    EthtoolFeatureError,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool_names import (
    LEGACY_FLAGS,
    _legacy_for,
    _onoff,
    kernel_pattern_match,
    known_names,
    persistence_names,
    resolve_feature,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import NicError


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


def features_as_parsed(features):
    """Rebuild parse_ethtool_k()'s ``{features, groups}`` from the ``features`` of ``ansible_facts.nics``.

    The facts keep every printed line (group lines and their members) but not the indentation. ethtool prints a
    legacy flag (off_flag_def) as a group line with the kernel features it covers indented below when its
    kernel pattern matches more than its own name, so the groups follow from LEGACY_FLAGS.
    """
    if not isinstance(features, dict):
        raise NicError('features must be a dict name -> {{enabled, fixed}}, got {0!r}'.format(features))
    parsed = OrderedDict()
    for name in features:
        state = features[name]
        if not isinstance(state, dict):
            raise NicError('features[{0!r}] must be a dict with enabled and fixed, got {1!r}'.format(name, state))
        parsed[name] = {'enabled': bool(state.get('enabled')), 'fixed': bool(state.get('fixed'))}
    groups = OrderedDict()
    for _short, long_name, pattern in LEGACY_FLAGS:
        if long_name not in parsed or '*' not in pattern:
            continue
        members = [name for name in parsed if name != long_name and kernel_pattern_match(name, pattern)]
        if members:
            groups[long_name] = members
    return {'interface': None, 'features': parsed, 'groups': groups}


# ---------------------------------------------------------------- the nic_offload role's decisions

def unit_env_args(persistence, features):
    """``ethtool -K`` arguments the boot unit applies, from nic_offload's ``persistence`` entry of one NIC.

    NetworkManager's names are exactly ethtool -K's (short legacy names, kernel names for the rest); the features
    NetworkManager has no property for are passed by the name the user gave (``features`` is
    nodeprep_nic_offload_features), when the user gave that name.
    """
    args = []
    for prop, value in (persistence.get('nm_properties') or {}).items():
        name = prop[len('ethtool.feature-'):] if prop.startswith('ethtool.feature-') else prop
        args.extend([name, value])
    for name in persistence.get('nm_unsupported') or []:
        if name in features:
            args.extend([name, 'on' if features[name] else 'off'])
    return args


def nm_property_names(names):
    """The NetworkManager properties (``ethtool.feature-gro``) that persist the features ``names`` as the user gave
    them (a legacy flag by its short name, anything else by its own name; persistence_names' naming), for the gather
    to read from a NIC's connection before the plan compares them; names NetworkManager has no property for are left
    out (the boot unit persists those)."""
    out = []
    for name in names:
        legacy = _legacy_for(name)
        prop = persistence_names({name: {'target': legacy[1] if legacy else name, 'value': False}})['nm_properties']
        out.extend(key for key in prop if key not in out)
    return out


def nm_connection_drift(ifname, connection, wanted):
    """What the NetworkManager connection of ``ifname`` (``nics.<ifname>.nm_connection`` of the gather) lacks of the
    ``wanted`` properties (``{property: 'on'|'off'}``): ``(changes, error)``; ``changes`` lists ``'<if>:
    NetworkManager connection <name>: <property> is <value>, wanted <value>'`` (a property not read counts as
    different), ``error`` why the connection could not be read."""
    connection = connection if isinstance(connection, dict) else {}
    if connection.get('error'):
        return [], 'interface {0}: its NetworkManager connection could not be read: {1}'.format(
            ifname, connection['error'])
    have = connection.get('properties') or {}
    changes = ['{0}: NetworkManager connection {1}: {2} is {3}, wanted {4}'.format(
        ifname, connection.get('name'), prop, have.get(prop) or 'not set', value)
        for prop, value in wanted.items() if have.get(prop) != value]
    return changes, None


def offload_plan(nics, selected, wanted, ignore_fixed=False):
    """What nic_offload would do on each selected NIC, judged from ``ansible_facts.nics`` with the module's own
    rules (plan_feature_changes and persistence_names); the nic_offload role's plan (plans/_plan_nic_offload.py) and so
    the readiness check nic.offload read it.

    ``wanted`` is nodeprep_nic_offload_features (``gro``, ``generic-receive-offload``, ``rx-gro-hw``, ... -> bool).
    Returns {ifname: {changes, skipped_fixed, persistence: {nm_managed, nm_properties, nm_unsupported, link_keys,
    link_unsupported}, error}}: ``changes`` maps the printed leaf name to ``{before, after}`` (empty when
    nic_offload has nothing to do); ``error`` is None, or the sentence nic_offload would fail with (an unknown
    name, a fixed feature asked to change unless ``ignore_fixed``), or that the features were not gathered.
    """
    plan = OrderedDict()
    for ifname in selected:
        nic = (nics or {}).get(ifname)
        entry = {'changes': {}, 'skipped_fixed': [], 'persistence': None, 'error': None}
        plan[ifname] = entry
        if not isinstance(nic, dict) or not isinstance(nic.get('features'), dict) or not nic['features']:
            entry['error'] = 'interface {0}: its offload features were not gathered'.format(ifname)
            continue
        try:
            decided = plan_feature_changes(features_as_parsed(nic['features']), wanted, ignore_fixed=ignore_fixed,
                                           ifname=ifname)
        except (EthtoolError, NicError) as exc:
            entry['error'] = str(exc)
            continue
        entry['changes'] = decided['changes']
        entry['skipped_fixed'] = decided['skipped_fixed']
        requests = dict((name, req) for name, req in decided['requests'].items()
                        if req['target'] not in decided['skipped_fixed'])
        persistence = {'nm_managed': nic.get('nm_managed')}
        persistence.update(persistence_names(requests))
        entry['persistence'] = persistence
    return plan
