# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
# Reads NIC state for nic_facts, nic_offload and gpu_node_facts:
# ``ip -j addr show`` (addresses, and the list of interfaces), sysfs
# (/sys/class/net/IFACE/mtu and speed), ``ethtool -i`` / ``ethtool -k`` and
# ``nmcli -t -f DEVICE,STATE device`` (and, when asked, a managed NIC's connection and its
# properties). The AnsibleModule passed in is used only
# for get_bin_path, warn and the collection's runner (collect/_runner.run_status: argv
# lists, the C locale). Errors are raised as NicError (parsers/_nic_selection.py), carrying
# cmd/rc/stdout/stderr when a command failed, so each module can hand them to fail_json.
# read_nics returns ethtool's outputs as printed (bounded: ETHTOOL_MAX_CHARS); parsers/_nic_facts.nics_from_read parses
# them: on the controller for gpu_node_facts, on the node for nic_facts and nic_offload (collect/_nic_features.py).

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import run_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import (
    NicError,
    link_addresses,
    select_nics,
)

SYSFS_NET = '/sys/class/net'
RUN_SYSTEMD = '/run/systemd/system'
# The most of an ethtool output the node returns (``ethtool -k`` prints about 3 KB; parsers/_nic_facts has the same).
ETHTOOL_MAX_CHARS = 64 * 1024


def find_tool(module, name, package=None):
    path = module.get_bin_path(name)
    if not path:
        raise NicError('{0} was not found in PATH or the sbin directories; install the {1} package'.format(
            name, package or name))
    return path


def _run_checked(module, argv, what):
    rc, out, err = run_status(module, argv)
    if rc != 0:
        raise NicError('{0} failed (rc={1}): {2}'.format(what, rc, (err or out).strip()),
                       cmd=argv, rc=rc, stdout=out, stderr=err)
    return out


def read_links(module):
    """``ip -j addr show`` -> list of interface dicts as ip prints them."""
    argv = [find_tool(module, 'ip', 'iproute2 (iproute on EL)'), '-j', 'addr', 'show']
    out = _run_checked(module, argv, 'ip -j addr show')
    try:
        links = json.loads(out or '[]')
    except ValueError as exc:
        raise NicError('ip -j addr show printed something that is not JSON: {0}'.format(exc),
                       cmd=argv, rc=0, stdout=out, stderr='')
    if not isinstance(links, list):
        raise NicError('ip -j addr show printed JSON that is not a list', cmd=argv, rc=0, stdout=out, stderr='')
    return [link for link in links if isinstance(link, dict) and link.get('ifname')]


def _read_sysfs_int(ifname, attr):
    """Integer in /sys/class/net/IFACE/ATTR, or None when it cannot be read or is negative."""
    path = os.path.join(SYSFS_NET, ifname, attr)
    try:
        with open(path) as handle:
            value = int(handle.read().strip())
    except (IOError, OSError, ValueError):
        return None
    return value if value >= 0 else None


def nm_device_states(module):
    """{ifname: state} from nmcli, or None when nmcli is missing or NetworkManager is not running."""
    nmcli = module.get_bin_path('nmcli')
    if not nmcli:
        return None
    argv = [nmcli, '-t', '-f', 'DEVICE,STATE', 'device']
    rc, out, err = run_status(module, argv)
    if rc != 0:
        # rc 8: NetworkManager is not running
        return None
    states = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        device, sep, state = line.rpartition(':')
        if sep:
            states[device.replace('\\:', ':')] = state.strip()
    return states


def nm_managed(states, ifname):
    """True/False from nm_device_states(); None when NetworkManager is absent or does not list the device."""
    if states is None or ifname not in states:
        return None
    return not states[ifname].startswith('unmanaged')


def read_nm_connection(module, nmcli, ifname, properties):
    """The NetworkManager connection of ``ifname`` (``nmcli -g GENERAL.CONNECTION device show``; None when it has
    none) and its ``properties`` (``nmcli -g p1,p2 connection show CONN``, one value a line, in the order asked):
    ``{name, properties, error}``; ``error`` says which command failed (then nothing else is known)."""
    out = {'name': None, 'properties': {}, 'error': None}
    argv = [nmcli, '-g', 'GENERAL.CONNECTION', 'device', 'show', ifname]
    rc, stdout, stderr = run_status(module, argv)
    if rc == 0 and stdout.strip() and properties:
        out['name'] = stdout.strip()
        argv = [nmcli, '-g', ','.join(properties), 'connection', 'show', out['name']]
        rc, stdout, stderr = run_status(module, argv)
        out['properties'] = dict(zip(properties, [line.strip() for line in stdout.splitlines()]))
    if rc != 0:
        out.update(name=None, properties={}, error='{0} (rc={1}): {2}'.format(' '.join(argv), rc, stderr.strip()))
    return out


def read_ethtool(module, ethtool, ifname, flag):
    """``{argv, rc, stdout, stderr}`` of ``ethtool -k|-i IFACE`` (rc 0), None for ``-i`` where the device does not
    support it (lo); NicError when it fails or prints more than ETHTOOL_MAX_CHARS, naming the interface."""
    argv = [ethtool, flag, ifname]
    if flag == '-k':
        rc, out, err = 0, _run_checked(module, argv, 'interface {0}: ethtool -k'.format(ifname)), ''
    else:
        rc, out, err = run_status(module, argv)
        if rc != 0 and 'Operation not supported' in (err or '') + (out or ''):
            return None
        if rc != 0:
            raise NicError('interface {0}: ethtool -i failed (rc={1}): {2}'.format(ifname, rc, (err or out).strip()),
                           cmd=argv, rc=rc, stdout=out, stderr=err)
    if len(out or '') + len(err or '') > ETHTOOL_MAX_CHARS:
        raise NicError('interface {0}: ethtool {1} printed more than {2} characters'.format(
            ifname, flag, ETHTOOL_MAX_CHARS), cmd=argv, rc=rc)
    return {'argv': argv, 'rc': rc, 'stdout': out, 'stderr': err}


def read_nics(module, interfaces=None, networks=None, nm_properties=None):
    """What the node holds of the ``ansible_facts.nics`` dict (docs/contracts.md), keyed by interface name, with
    ``ethtool -k`` and ``-i`` as printed (read_ethtool; parsers/_nic_facts.nics_from_read makes the namespace).

    With neither ``interfaces`` nor ``networks`` every interface is read. With
    either or both, the interfaces named plus those holding an address inside
    one of the networks (CIDR strings, IPv4 or IPv6). A named interface that
    does not exist raises NicError listing the ones that do. With ``nm_properties``
    (NetworkManager property names), each interface NetworkManager manages also
    gets ``nm_connection`` (read_nm_connection).
    """
    links = read_links(module)
    by_name = dict((link['ifname'], link) for link in links)
    wanted_names = list(interfaces or [])
    missing = [name for name in wanted_names if name not in by_name]
    if missing:
        raise NicError('interface {0} not found; interfaces present: {1}'.format(
            ', '.join(missing), ', '.join(sorted(by_name))))
    addresses_of = dict((link['ifname'], link_addresses(link)) for link in links)
    if not wanted_names and not networks:
        chosen = set(addresses_of)
    else:
        chosen = set(select_nics(dict((name, {'addresses': addresses_of[name]}) for name in addresses_of),
                                 names=wanted_names, networks=networks))
    selected = [(link['ifname'], link, addresses_of[link['ifname']]) for link in links if link['ifname'] in chosen]
    if not selected:
        return {}
    ethtool = find_tool(module, 'ethtool')
    states = nm_device_states(module)
    facts = {}
    for name, link, addresses in selected:
        mtu = _read_sysfs_int(name, 'mtu')
        if mtu is None:
            mtu = link.get('mtu')
        features = read_ethtool(module, ethtool, name, '-k')
        facts[name] = {
            'mtu': mtu,
            'speed_mbps': _read_sysfs_int(name, 'speed'),
            'addresses': addresses,
            'ethtool_i': read_ethtool(module, ethtool, name, '-i'),
            'ethtool_k': features,
            'nm_managed': nm_managed(states, name),
        }
        if nm_properties and facts[name]['nm_managed']:
            facts[name]['nm_connection'] = read_nm_connection(module, module.get_bin_path('nmcli'), name,
                                                              list(nm_properties))
    return facts


def persistence_method(nm_is_managed, link_unsupported):
    """How a role should make settings survive a reboot on this interface."""
    if nm_is_managed:
        return 'networkmanager'
    if not link_unsupported and os.path.isdir(RUN_SYSTEMD):
        return 'systemd-networkd-link'
    return 'unit'
