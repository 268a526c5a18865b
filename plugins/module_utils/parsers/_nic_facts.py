# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The ``nics`` namespace from what the node read (collect/_nic.read_nics: ``ethtool -k`` and ``-i`` as printed):
on the controller for gpu_node_facts (the gather ships no ethtool parser), on the node for nic_facts and nic_offload.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import (
    EthtoolError,
    parse_ethtool_i,
    parse_ethtool_k,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import NicError

# The most of an ethtool output the node returns (collect/_nic.ETHTOOL_MAX_CHARS: the same bound).
ETHTOOL_MAX_CHARS = 64 * 1024
DRIVER_KEYS = ('driver', 'version', 'firmware_version', 'bus_info')


def _output(read, ifname, flag, host):
    """(argv, rc, stdout, stderr) of a read_ethtool record; NicError naming the host and interface when it is not one
    or is longer than the bound."""
    try:
        argv, rc, out, err = [read[key] for key in ('argv', 'rc', 'stdout', 'stderr')]
        size = len(out) + len(err)
    except (KeyError, TypeError) as exc:
        raise NicError('{0}interface {1}: the node\'s ethtool {2} read is garbled ({3}: {4})'.format(
            'host {0}: '.format(host) if host else '', ifname, flag, type(exc).__name__, exc))
    if size > ETHTOOL_MAX_CHARS:
        raise NicError('{0}interface {1}: ethtool {2} returned {3} characters, more than the {4} the gather '
                       'returns'.format('host {0}: '.format(host) if host else '', ifname, flag, size,
                                        ETHTOOL_MAX_CHARS), cmd=argv, rc=rc)
    return argv, rc, out, err


def nic_from_read(ifname, read, host=None):
    """One interface's facts: its read with ``driver`` (parse_ethtool_i; all None where ``-i`` is not supported)
    and ``features`` (parse_ethtool_k) in place of the outputs.  NicError naming the interface (and the command's
    output) for an output that does not parse."""
    nic = dict((key, value) for key, value in read.items() if key not in ('ethtool_i', 'ethtool_k'))
    argv, rc, out, err = _output(read.get('ethtool_k'), ifname, '-k', host)
    try:
        parsed = parse_ethtool_k(out)
    except EthtoolError as exc:
        raise NicError('interface {0}: {1}'.format(ifname, exc), cmd=argv, rc=0, stdout=out, stderr='')
    nic['features'] = dict((key, dict(value)) for key, value in parsed['features'].items())
    nic['driver'] = dict((key, None) for key in DRIVER_KEYS)
    if read.get('ethtool_i') is not None:
        argv, rc, out, err = _output(read['ethtool_i'], ifname, '-i', host)
        try:
            info = parse_ethtool_i(out)
        except EthtoolError as exc:
            raise NicError('interface {0}: {1}'.format(ifname, exc), cmd=argv, rc=rc, stdout=out, stderr=err)
        nic['driver'] = dict((key, info.get(key)) for key in DRIVER_KEYS)
    return nic


def nics_from_read(read, host=None):
    """The ``nics`` namespace ({interface: facts}) from collect/_nic.read_nics."""
    if not isinstance(read, dict):
        raise NicError('{0}the node\'s read of its interfaces is {1}, not a mapping'.format(
            'host {0}: '.format(host) if host else '', type(read).__name__))
    return dict((name, nic_from_read(name, nic, host)) for name, nic in read.items())
