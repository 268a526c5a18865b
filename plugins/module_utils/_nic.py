# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice; do not import it
# from other collections or from playbooks.
#
# Reads NIC state for nic_facts, nic_offload and gpu_node_facts:
# ``ip -j addr show`` (addresses, and the list of interfaces), sysfs
# (/sys/class/net/IFACE/mtu and speed), ``ethtool -i`` / ``ethtool -k`` and
# ``nmcli -t -f DEVICE,STATE device``. The AnsibleModule passed in is used only
# for get_bin_path, warn and the collection's runner (_runner.run_status: argv
# lists, the C locale). Errors are raised as NicError, carrying cmd/rc/stdout/stderr when a
# command failed, so each module can hand them to fail_json.
#
# select_nics() is the collection's one NIC selection (by name, driver or
# network): nic_facts, the nic_offload and nccl roles' plans and the readiness
# checks all call it. Network matching uses the
# standard library's ipaddress module (Python 3.3+, so also EL8's
# platform-python 3.6); netaddr is not needed.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ipaddress
import json
import os

from collections import OrderedDict

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._facts_module import FactsReadError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._ethtool import (
    LEGACY_FLAGS,
    EthtoolError,
    kernel_pattern_match,
    parse_ethtool_i,
    parse_ethtool_k,
    persistence_names,
    plan_feature_changes,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._runner import run_status

SYSFS_NET = '/sys/class/net'
RUN_SYSTEMD = '/run/systemd/system'


class NicError(FactsReadError):
    """A NIC could not be read; carries the failed command's details when there is one."""


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


def link_addresses(link):
    """{"ipv4": [cidr], "ipv6": [cidr]} from one ``ip -j addr`` entry."""
    result = {'ipv4': [], 'ipv6': []}
    for info in link.get('addr_info') or []:
        family = {'inet': 'ipv4', 'inet6': 'ipv6'}.get(info.get('family'))
        if family is None or info.get('local') is None or info.get('prefixlen') is None:
            continue
        result[family].append('{0}/{1}'.format(info['local'], info['prefixlen']))
    return result


def _as_list(value, what):
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise NicError('{0} must be a list, got {1}: {2!r}'.format(what, type(value).__name__, value))


def parse_networks(networks, what='networks'):
    """List of CIDR strings -> ip_network objects; NicError names the bad one."""
    parsed = []
    for pos, value in enumerate(_as_list(networks, what)):
        try:
            parsed.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError as exc:
            raise NicError('{0}[{1}] {2!r} is not a valid network (CIDR such as 10.20.0.0/16): {3}'.format(
                what, pos, value, exc))
    return parsed


def valid_networks(networks):
    """Whether every item of ``networks`` is a CIDR network (what parse_networks takes without an error)."""
    try:
        parse_networks(networks)
    except NicError:
        return False
    return True


def _nic_addresses(ifname, nic):
    addresses = nic.get('addresses') or {}
    if not isinstance(addresses, dict):
        raise NicError('nics[{0!r}].addresses must be a dict with ipv4/ipv6 lists, got {1!r}'.format(
            ifname, addresses))
    result = []
    for family in ('ipv4', 'ipv6'):
        for pos, cidr in enumerate(addresses.get(family) or []):
            try:
                result.append(ipaddress.ip_interface(str(cidr)).ip)
            except ValueError as exc:
                raise NicError('nics[{0!r}].addresses.{1}[{2}] {3!r} is not an address: {4}'.format(
                    ifname, family, pos, cidr, exc))
    return result


def select_nics(nics, names=None, drivers=None, networks=None, what='networks'):
    """The one NIC selection: sorted names of the interfaces chosen by name, kernel driver or network.

    ``nics`` is ``ansible_facts.nics`` (or any dict name -> ``{addresses: {ipv4, ipv6}, driver: {driver}}``).
    An interface is chosen when its name is in ``names``, its driver (``driver.driver``) is in ``drivers``, or
    one of its IPv4/IPv6 addresses lies inside one of ``networks`` (CIDR strings). No selector chooses nothing.
    Used by nic_facts/gpu_node_facts (which interfaces to read), the nic_offload role's plan (and so the readiness
    check nic.offload), the nccl role's plan (and so the readiness check nccl.config). Raises NicError naming the bad
    input;
    ``what`` names the networks setting in that message.
    """
    if not isinstance(nics, dict):
        raise NicError('input must be the ansible_facts.nics dict (interface name -> facts), got {0}'.format(
            type(nics).__name__))
    wanted_names = set(str(n) for n in _as_list(names, 'names'))
    wanted_drivers = set(str(d) for d in _as_list(drivers, 'drivers'))
    nets = parse_networks(networks, what)
    selected = []
    for ifname in sorted(nics):
        nic = nics[ifname]
        if not isinstance(nic, dict):
            raise NicError('nics[{0!r}] must be a dict, got {1!r}'.format(ifname, nic))
        driver_info = nic.get('driver')
        driver = driver_info.get('driver') if isinstance(driver_info, dict) else None
        if ifname in wanted_names or (driver is not None and driver in wanted_drivers):
            selected.append(ifname)
            continue
        if nets:
            for address in _nic_addresses(ifname, nic):
                if any(address.version == net.version and address in net for net in nets):
                    selected.append(ifname)
                    break
    return selected


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


def read_features(module, ethtool, ifname):
    """parse_ethtool_k() of ``ethtool -k IFACE``; NicError on failure, naming the interface."""
    argv = [ethtool, '-k', ifname]
    out = _run_checked(module, argv, 'interface {0}: ethtool -k'.format(ifname))
    try:
        return parse_ethtool_k(out)
    except EthtoolError as exc:
        raise NicError('interface {0}: {1}'.format(ifname, exc), cmd=argv, rc=0, stdout=out, stderr='')


def read_driver(module, ethtool, ifname):
    """``ethtool -i IFACE`` -> {driver, version, firmware_version, bus_info}; all None when not supported (lo)."""
    argv = [ethtool, '-i', ifname]
    rc, out, err = run_status(module, argv)
    empty = {'driver': None, 'version': None, 'firmware_version': None, 'bus_info': None}
    if rc != 0:
        if 'Operation not supported' in (err or '') + (out or ''):
            return empty
        raise NicError('interface {0}: ethtool -i failed (rc={1}): {2}'.format(ifname, rc, (err or out).strip()),
                       cmd=argv, rc=rc, stdout=out, stderr=err)
    try:
        info = parse_ethtool_i(out)
    except EthtoolError as exc:
        raise NicError('interface {0}: {1}'.format(ifname, exc), cmd=argv, rc=rc, stdout=out, stderr=err)
    return dict((key, info.get(key)) for key in empty)


def collect_nic_facts(module, interfaces=None, networks=None):
    """The ``ansible_facts.nics`` dict (docs/contracts.md), keyed by interface name.

    With neither ``interfaces`` nor ``networks`` every interface is read. With
    either or both, the interfaces named plus those holding an address inside
    one of the networks (CIDR strings, IPv4 or IPv6). A named interface that
    does not exist raises NicError listing the ones that do.
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
        parsed = read_features(module, ethtool, name)
        facts[name] = {
            'mtu': mtu,
            'speed_mbps': _read_sysfs_int(name, 'speed'),
            'addresses': addresses,
            'driver': read_driver(module, ethtool, name),
            'features': dict((key, dict(value)) for key, value in parsed['features'].items()),
            'nm_managed': nm_managed(states, name),
        }
    return facts


def persistence_method(nm_is_managed, link_unsupported):
    """How a role should make settings survive a reboot on this interface."""
    if nm_is_managed:
        return 'networkmanager'
    if not link_unsupported and os.path.isdir(RUN_SYSTEMD):
        return 'systemd-networkd-link'
    return 'unit'


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


def offload_plan(nics, selected, wanted, ignore_fixed=False):
    """What nic_offload would do on each selected NIC, judged from ``ansible_facts.nics`` with the module's own
    rules (plan_feature_changes and persistence_names); the nic_offload role's plan (_plan_nic_offload.py) and so
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
