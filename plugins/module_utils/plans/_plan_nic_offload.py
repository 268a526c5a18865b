# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The nic_offload role's plan (see plans/_plan.py for the shape): which NICs, which features change on each, the
``nic_offload`` module's arguments, and the files that persist the features (the boot unit, each interface's
environment file, the ``.device.wants`` links), rendered here in full.

The rules it uses live elsewhere and are not written again here: the NIC selection is ``_nic_selection.select_nics``, what
ethtool would change and how each feature persists is ``_nic_offload.offload_plan`` (``_nic_offload.plan_feature_changes`` and
``persistence_names``, which the ``nic_offload`` module runs on the node), and the boot unit's ``ethtool -K``
arguments are ``_nic_offload.unit_env_args``.  The readiness check ``nic.offload`` is this plan's drift.

Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import fnmatch
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool_names import LEGACY_FLAGS
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import (
    NicError,
    parse_networks,
    select_nics,
    valid_networks,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._nic_offload import (
    nm_connection_drift,
    nm_property_names,
    offload_plan,
    unit_env_args,
)

ROLE = 'nic_offload'
CHECK = 'nic.offload'
CHECKS = (CHECK,)

SETTINGS = {
    'nodeprep_nic_offload_features': {
        'type': 'dict', 'default': {},
        'description': ['Feature name to wanted state (true on, false off). Names as C(ethtool -k) prints them '
                        '(V(generic-receive-offload)), the short C(ethtool -K) names (V(gro), V(lro), V(tso)...) or '
                        'kernel names (V(rx-gro-hw)), for example V({gro: false, lro: false}).',
                        'Empty: the role does nothing.']},
    'nodeprep_nic_offload_interfaces': {
        'type': 'list', 'elements': 'str', 'default': [],
        'description': ['Interface names to select.',
                        'The role works on every interface named here, driven by one of '
                        'O(nodeprep_nic_offload_drivers) or with an address in one of O(nodeprep_nic_offload_networks); '
                        'with all three empty nothing is selected.']},
    'nodeprep_nic_offload_drivers': {
        'type': 'list', 'elements': 'str', 'default': [],
        'description': 'Kernel drivers whose interfaces are selected (for example V(mlx5_core)).'},
    'nodeprep_nic_offload_networks': {
        'type': 'list', 'elements': 'str', 'default': [],
        'description': 'Networks in CIDR notation; interfaces with an address inside one are selected.'},
    'nodeprep_nic_offload_ignore_fixed': {
        'type': 'bool', 'default': False,
        'description': 'Skip features the driver marks C([fixed]) with a warning instead of failing.'},
    'nodeprep_nic_offload_require_match': {
        'type': 'bool', 'default': False,
        'description': 'Fail on a host where the selectors match no interface (by default it reports and skips).'},
    'nodeprep_nic_offload_persist': {
        'type': 'bool', 'default': True,
        'description': ['Make the settings survive a reboot: NetworkManager connection properties where '
                        'NetworkManager manages the device, otherwise a per-interface oneshot unit that runs '
                        'C(ethtool -K) at boot.']},
}

# Where the boot-time unit and its per-interface settings live, and the tools the unit and the tasks run.
ETHTOOL = '/usr/sbin/ethtool'
UNIT_DIR = '/etc/systemd/system'
ENV_DIR = '/etc/nodeprep/nic-offload'
UNIT_NAME = 'nodeprep-nic-offload@.service'
UNIT_FILE = UNIT_DIR + '/' + UNIT_NAME
DEVICE_PREFIX = 'sys-subsystem-net-devices-'
# What the one gather reads besides the NIC facts: the per-interface paths are globs (the interfaces are only known
# from the NIC facts); a path a gathered glob did not report does not exist.
FILE_PATTERNS = (ENV_DIR + '/*.env', UNIT_DIR + '/' + DEVICE_PREFIX + '*.device.wants',
                 UNIT_DIR + '/' + DEVICE_PREFIX + '*.device.wants/nodeprep-nic-offload@*.service')

# Ansible's boolean spellings (ansible.module_utils.parsing.convert_bool), which the nic_offload module accepts.
_TRUE = ('y', 'yes', 'on', '1', 'true', 't')
_FALSE = ('n', 'no', 'off', '0', 'false', 'f')
# A feature name as ethtool prints or takes it (_ethtool._FEATURE_RE's name).
_FEATURE_NAME_RE = re.compile(r'^[A-Za-z0-9_.-]+$')
# Linux interface names (dev_valid_name): 1-15 bytes, not "." or "..", no "/", ":" or white space.
_IFNAME_RE = re.compile(r'^[^/:\s]{1,15}$')

FEATURES_ALLOWED = ('feature name -> true/false (yes/no, on/off also read); names as ethtool -k prints them '
                    '(generic-receive-offload), the short ethtool -K names ({0}) or kernel names (rx-gro-hw)'.format(
                        ', '.join(flag[0] for flag in LEGACY_FLAGS)))
SELECTORS_ALLOWED = ('with features set, at least one of nodeprep_nic_offload_interfaces, _drivers or _networks '
                     'must select NICs (all three are empty)')


def systemd_escape(name):
    """``systemd-escape`` of ``name`` (unit_name_from_path's escaping): ``-`` and every byte that is not a letter,
    digit, ``:``, ``_`` or ``.`` become ``\\xNN``; a leading ``.`` too; ``/`` becomes ``-``."""
    out = []
    for index, char in enumerate(name):
        if char == '/':
            out.append('-')
        elif char.isalnum() and ord(char) < 128 or (char in ':_.' and not (index == 0 and char == '.')):
            out.append(char)
        else:
            out.extend('\\x{0:02x}'.format(byte) for byte in bytearray(char.encode('utf-8')))
    return ''.join(out)


def unit_text():
    """The boot unit ``nodeprep-nic-offload@.service``: re-applies ``<ENV_DIR>/<interface>.env`` with ``ethtool -K``
    when the interface's device appears (``ethtool -K`` settings are lost at reboot)."""
    return '\n'.join([
        _plan.managed_line(ROLE),
        '# gpufleet.nodeprep.nic_offload: ethtool -K settings are lost at reboot; this re-applies',
        '# {0}/<interface>.env when the interface appears.'.format(ENV_DIR),
        '[Unit]',
        'Description=Apply NIC offload features to %I (gpufleet.nodeprep)',
        'BindsTo=sys-subsystem-net-devices-%i.device',
        'After=sys-subsystem-net-devices-%i.device',
        'ConditionPathExists={0}/%I.env'.format(ENV_DIR),
        '',
        '[Service]',
        'Type=oneshot',
        'RemainAfterExit=yes',
        'EnvironmentFile={0}/%I.env'.format(ENV_DIR),
        'ExecStart={0} -K %I $NODEPREP_ETHTOOL_FEATURES'.format(ETHTOOL),
        '',
        '[Install]',
        'WantedBy=sys-subsystem-net-devices-%i.device',
        '',
    ])


def env_text(persistence, features):
    """One interface's environment file: the ``ethtool -K`` arguments the boot unit applies."""
    args = ' '.join(unit_env_args(persistence, features))
    return '{0}\nNODEPREP_ETHTOOL_FEATURES={1}\n'.format(_plan.managed_line(ROLE), args)


def wants_dir(ifname):
    return '{0}/{1}{2}.device.wants'.format(UNIT_DIR, DEVICE_PREFIX, systemd_escape(ifname))


def wants_link(ifname):
    return '{0}/nodeprep-nic-offload@{1}.service'.format(wants_dir(ifname), systemd_escape(ifname))


def _boolean(value):
    """True/False for Ansible's boolean spellings; None for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    return None


def wanted_features(plan, settings):
    """The features as name -> bool; a problem (and None) when a name or a value cannot be used."""
    features = settings['nodeprep_nic_offload_features']
    if not isinstance(features, dict):
        _plan.add_problem(plan, 'nodeprep_nic_offload_features', features, FEATURES_ALLOWED)
        return None
    bad_names = sorted(str(name) for name in features
                       if not isinstance(name, str) or not _FEATURE_NAME_RE.match(name))
    bad_values = sorted(str(name) for name, value in features.items() if _boolean(value) is None)
    if bad_names:
        _plan.add_problem(plan, 'nodeprep_nic_offload_features', features, '{0}; not a feature name: {1}'.format(
            FEATURES_ALLOWED, ', '.join(_plan.show(name) for name in bad_names)))
    if bad_values:
        _plan.add_problem(plan, 'nodeprep_nic_offload_features', features, '{0}; not true or false: {1}'.format(
            FEATURES_ALLOWED, ', '.join(bad_values)))
    if bad_names or bad_values:
        return None
    return dict((name, _boolean(value)) for name, value in features.items())


def check_selectors(plan, settings):
    """Problems for selectors that cannot name an interface, a driver or a network."""
    interfaces = settings['nodeprep_nic_offload_interfaces']
    bad = [name for name in interfaces if not _IFNAME_RE.match(name) or name in ('.', '..')]
    if bad:
        _plan.add_problem(plan, 'nodeprep_nic_offload_interfaces', interfaces,
                          'interface names of 1 to 15 characters without "/", ":" or white space; not one: '
                          '{0}'.format(', '.join(_plan.show(name) for name in bad)))
    drivers = settings['nodeprep_nic_offload_drivers']
    bad = [name for name in drivers if not name or re.search(r'\s', name)]
    if bad:
        _plan.add_problem(plan, 'nodeprep_nic_offload_drivers', drivers,
                          'kernel driver names as ethtool -i prints them (mlx5_core); not one: {0}'.format(
                              ', '.join(_plan.show(name) for name in bad)))
    networks = settings['nodeprep_nic_offload_networks']
    try:
        parse_networks(networks, 'nodeprep_nic_offload_networks')
    except NicError as exc:
        _plan.add_problem(plan, 'nodeprep_nic_offload_networks', networks, str(exc))


def _selectors_text(settings):
    return 'nodeprep_nic_offload_interfaces={0}, _drivers={1}, _networks={2}'.format(
        _plan.show(settings['nodeprep_nic_offload_interfaces']), _plan.show(settings['nodeprep_nic_offload_drivers']),
        _plan.show(settings['nodeprep_nic_offload_networks']))


def gather(settings):
    """The NIC facts (only the interfaces on the networks when networks are the only selector) and, when the
    features persist, the boot unit's files."""
    request = _plan.new_gather()
    if not settings['nodeprep_nic_offload_features']:
        return request
    request['subsets'] = ['nic']
    networks = list(settings['nodeprep_nic_offload_networks'])
    if not settings['nodeprep_nic_offload_interfaces'] and not settings['nodeprep_nic_offload_drivers'] and \
            valid_networks(networks):
        # Only networks that parse narrow the gather; with a bad one every NIC is read and the plan refuses it.
        request['nic_networks'] = networks
    if settings['nodeprep_nic_offload_persist']:
        request['files'] = [UNIT_FILE, ENV_DIR] + list(FILE_PATTERNS)
        if isinstance(settings['nodeprep_nic_offload_features'], dict):
            # What a NIC NetworkManager manages holds in its connection, read in the same gather.
            request['nic_nm_properties'] = nm_property_names(sorted(settings['nodeprep_nic_offload_features']))
    return request


def _files_seen(facts):
    """ansible_facts with ``nodeprep_files`` completed: a path that a gathered glob would have reported, and did
    not, does not exist."""
    files = facts.get('nodeprep_files') if isinstance(facts.get('nodeprep_files'), dict) else {}
    patterns = [p for p in facts.get('nodeprep_file_patterns') or [] if p in FILE_PATTERNS]
    paths = [path for path in files if isinstance(files[path], dict)]

    def state(path):
        if path in paths or not any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns):
            return files.get(path)
        return {'exists': False}
    return state


def _want(plan, seen, path, **kwargs):
    facts = {'nodeprep_files': {path: seen(path)} if seen(path) is not None else {}}
    return _plan.want_path(plan, facts, path, check=CHECK, **kwargs)


def plan(facts, settings, context):
    """The nic_offload plan of one node (see the module docstring)."""
    out = _plan.new_plan(ROLE)
    out['args']['nic_offload'] = None
    out['args']['networkmanager'] = []
    wanted = wanted_features(out, settings)
    check_selectors(out, settings)
    features = settings['nodeprep_nic_offload_features']
    if not isinstance(features, dict):
        _plan.set_check(out, CHECK, 'the features of nodeprep_nic_offload_features on the NICs chosen by name, '
                        'driver or network')
        return out
    interfaces = settings['nodeprep_nic_offload_interfaces']
    drivers = settings['nodeprep_nic_offload_drivers']
    networks = settings['nodeprep_nic_offload_networks']
    if features and not (interfaces or drivers or networks):
        _plan.add_problem(out, 'nodeprep_nic_offload_features', features, SELECTORS_ALLOWED)
    if not features:
        _plan.set_check(out, CHECK, 'not managed (nodeprep_nic_offload_features is empty)',
                        skip='no NIC offload setting managed')
        return out
    expected = '{0} on the NICs chosen by name, driver or network'.format(', '.join(
        '{0} {1}'.format(name, 'on' if _boolean(value) else 'off') for name, value in sorted(features.items())))
    _plan.set_check(out, CHECK, expected)
    if out['problems']:
        return out
    errors = facts.get('nodeprep_errors') if isinstance(facts.get('nodeprep_errors'), dict) else {}
    if errors.get('nic'):
        out['errors'].append('the NIC facts could not be read: {0}'.format(errors['nic']))
        _plan.add_drift(out, CHECK, 'could not be read: {0}'.format(errors['nic']), fixable=False)
        return out
    nics = facts.get('nics')
    if not isinstance(nics, dict):
        # Not gathered: _plan.plan_with says what is missing.
        return out
    host = context.get('host') or 'this host'
    try:
        chosen = select_nics(nics, interfaces, drivers, networks, what='nodeprep_nic_offload_networks')
    except NicError as exc:
        out['errors'].append('the NIC facts cannot be read: {0}'.format(exc))
        _plan.add_drift(out, CHECK, 'could not be read: {0}'.format(exc), fixable=False)
        return out
    if not chosen:
        text = 'no NIC matches (interfaces {0}, drivers {1}, networks {2})'.format(
            ', '.join(interfaces) or '-', ', '.join(drivers) or '-', ', '.join(networks) or '-')
        present = _plan.show(sorted(nics))
        if settings['nodeprep_nic_offload_require_match']:
            out['errors'].append('nodeprep_nic_offload_require_match is true and no interface on {0} matches {1}; '
                                 'present: {2}'.format(host, _selectors_text(settings), present))
            _plan.add_drift(out, CHECK, text, fixable=False)
        else:
            out['reports'].append('No interface on {0} matches {1}; present: {2}. Nothing to do here.'.format(
                host, _selectors_text(settings), present))
            _plan.set_check(out, CHECK, expected, skip=text)
        out['checks'][CHECK]['nics'] = []
        return out
    for name in interfaces:
        if name not in nics:
            _plan.add_drift(out, CHECK, '{0}: no such interface'.format(name), fixable=False)
    decided = offload_plan(nics, chosen, wanted, settings['nodeprep_nic_offload_ignore_fixed'])
    changing = []
    skipped = []
    for ifname in chosen:
        entry = decided[ifname]
        if entry['error']:
            out['errors'].append(entry['error'])
            _plan.add_drift(out, CHECK, entry['error'], fixable=False)
            continue
        if entry['changes']:
            changing.append(ifname)
        for leaf, change in entry['changes'].items():
            _plan.add_drift(out, CHECK, '{0}: {1} is {2}'.format(ifname, leaf, 'on' if change['before'] else 'off'))
        have = nics[ifname]['features']
        for leaf in entry['skipped_fixed']:
            skipped.append('{0}: {1} is {2} [fixed]: the driver does not allow a change'.format(
                ifname, leaf, 'on' if (have.get(leaf) or {}).get('enabled') else 'off'))
    for msg in skipped:
        _plan.add_drift(out, CHECK, msg, fixable=False, level='warn')
    if out['errors']:
        return out
    if changing:
        out['args']['nic_offload'] = {'interface': changing, 'features': wanted,
                                      'ignore_fixed': settings['nodeprep_nic_offload_ignore_fixed']}
    if settings['nodeprep_nic_offload_persist']:
        _persist(out, facts, chosen, decided, wanted)
    if not [item for item in out['drift'] if item['check'] == CHECK]:
        _plan.set_check(out, CHECK, expected, 'as wanted on {0}'.format(', '.join(chosen)))
    out['checks'][CHECK]['nics'] = chosen
    return out


def _unit_files(out, seen, ifnames, decided, wanted):
    """The boot unit, the environment directory and, per interface, its environment file, its device's wants
    directory and the link that enables the unit there (what ``systemctl enable`` would make)."""
    _want(out, seen, UNIT_FILE, content=unit_text(), mode='0644')
    _want(out, seen, ENV_DIR, state='directory', mode='0755')
    for ifname in ifnames:
        content = env_text(decided[ifname]['persistence'], wanted)
        _want(out, seen, '{0}/{1}.env'.format(ENV_DIR, ifname), content=content, mode='0644')
        _want(out, seen, wants_dir(ifname), state='directory', mode='0755')
        _want(out, seen, wants_link(ifname), state='link', src=UNIT_FILE)
        out['units'].append({'name': 'nodeprep-nic-offload@{0}.service'.format(systemd_escape(ifname)),
                             'wanted_by': '{0}{1}.device'.format(DEVICE_PREFIX, systemd_escape(ifname))})


def _persist(out, facts, chosen, decided, wanted):
    """NetworkManager's connection properties where it manages the device, has a connection for it and a property for
    every feature (the gather read that connection: nics.<if>.nm_connection); else the boot unit.  A connection
    property that differs is drift of nic.offload (``nmcli connection modify``); a connection that cannot be read
    is an error."""
    seen = _files_seen(facts)
    unit_nics = []
    for ifname in chosen:
        persistence = decided[ifname]['persistence']
        connection = (facts.get('nics') or {}).get(ifname, {}).get('nm_connection')
        if persistence['nm_managed'] and not persistence['nm_unsupported'] and isinstance(connection, dict) \
                and (connection.get('name') or connection.get('error')):
            changes, error = nm_connection_drift(ifname, connection, persistence['nm_properties'])
            if error:
                out['errors'].append(error)
                _plan.add_drift(out, CHECK, error, fixable=False)
                continue
            for change in changes:
                _plan.add_drift(out, CHECK, change)
            if changes:
                out['args']['networkmanager'].append({'interface': ifname, 'connection': connection['name'],
                                                      'properties': dict(persistence['nm_properties'])})
        else:
            # Not managed by NetworkManager, a feature it has no property for, or managed without a connection.
            unit_nics.append(ifname)
    if unit_nics:
        _unit_files(out, seen, unit_nics, decided, wanted)
