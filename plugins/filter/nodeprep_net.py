# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side network selection for the gpufleet.nodeprep roles.

``nodeprep_select_nics`` turns the ``ansible_facts.nics`` dictionary (written by
``gpufleet.nodeprep.nic_facts`` / ``gpu_node_facts``) into the sorted list of
interface names chosen by name, by kernel driver or by network (CIDR).  The CIDR
match runs on the controller with netaddr, so the managed nodes need nothing.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

try:
    import netaddr
except ImportError:  # pragma: no cover - reported when the filter is used
    netaddr = None


class NicSelectError(Exception):
    """Raised when the facts or the selectors given to select_nics are malformed."""


def _as_list(value, what):
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise NicSelectError('{0} must be a list, got {1}: {2!r}'.format(what, type(value).__name__, value))


def _parse_networks(networks):
    parsed = []
    for pos, cidr in enumerate(_as_list(networks, 'networks')):
        try:
            parsed.append(netaddr.IPNetwork(str(cidr)))
        except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
            raise NicSelectError('networks[{0}] {1!r} is not a valid network (CIDR such as 10.20.0.0/16): {2}'.format(pos, cidr, exc))
    return parsed


def _addresses(ifname, nic):
    addresses = nic.get('addresses') or {}
    if not isinstance(addresses, dict):
        raise NicSelectError('nics[{0!r}].addresses must be a dict with ipv4/ipv6 lists, got {1!r}'.format(ifname, addresses))
    result = []
    for family in ('ipv4', 'ipv6'):
        for pos, cidr in enumerate(addresses.get(family) or []):
            try:
                result.append(netaddr.IPNetwork(str(cidr)).ip)
            except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
                raise NicSelectError('nics[{0!r}].addresses.{1}[{2}] {3!r} is not an address: {4}'.format(ifname, family, pos, cidr, exc))
    return result


def select_nics(nics, names=None, drivers=None, networks=None):
    """Return the sorted names of the interfaces matching any selector.

    ``nics`` is ``ansible_facts.nics``.  An interface is selected when its name is
    in ``names``, its kernel driver (``driver.driver``) is in ``drivers``, or one
    of its addresses lies inside one of ``networks``.  No selector selects nothing.
    """
    if netaddr is None:
        raise NicSelectError('the netaddr Python library is required on the controller (pip install netaddr)')
    if not isinstance(nics, dict):
        raise NicSelectError('input must be the ansible_facts.nics dict (interface name -> facts), got {0}'.format(type(nics).__name__))
    wanted_names = set(str(n) for n in _as_list(names, 'names'))
    wanted_drivers = set(str(d) for d in _as_list(drivers, 'drivers'))
    nets = _parse_networks(networks)
    selected = []
    for ifname in sorted(nics):
        nic = nics[ifname]
        if not isinstance(nic, dict):
            raise NicSelectError('nics[{0!r}] must be a dict, got {1!r}'.format(ifname, nic))
        driver = (nic.get('driver') or {}).get('driver')
        if ifname in wanted_names or (driver is not None and driver in wanted_drivers):
            selected.append(ifname)
            continue
        if nets:
            for address in _addresses(ifname, nic):
                if any(address.version == net.version and address in net for net in nets):
                    selected.append(ifname)
                    break
    return selected


def _select_nics_filter(nics, names=None, drivers=None, networks=None):
    try:
        return select_nics(nics, names=names, drivers=drivers, networks=networks)
    except NicSelectError as exc:
        raise AnsibleFilterError('nodeprep_select_nics: {0}'.format(exc))


class FilterModule(object):
    """gpufleet.nodeprep network filters."""

    def filters(self):
        return {
            'nodeprep_select_nics': _select_nics_filter,
        }
