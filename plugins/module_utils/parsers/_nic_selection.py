# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
# The addresses of ``ip -j addr`` entries and the collection's one NIC selection (by name, driver or network):
# nic_facts/gpu_node_facts (which interfaces to read), the nic_offload and nccl roles' plans and the readiness checks
# all call select_nics().  It sits with the parsers because the gather's collector (collect/_nic.py) reads the
# interfaces it chooses.  Network matching uses the standard library's ipaddress module (Python 3.3+, so also
# EL8's platform-python 3.6); netaddr is not needed.
#
# NicError is the error of the NIC readers too (a FactsReadError: cmd/rc/stdout/stderr when a command failed).

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ipaddress

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._facts_output import FactsReadError


class NicError(FactsReadError):
    """A NIC could not be read; carries the failed command's details when there is one."""


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
    input; ``what`` names the networks setting in that message.
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
