# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The NIC reads parsed on the node, for nic_facts and nic_offload (gpu_node_facts returns collect/_nic.read_nics
unparsed, and the controller parses it with the same function, parsers/_nic_facts.nics_from_read).  No Ansible
import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._nic import read_ethtool, read_nics
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_facts import nics_from_read
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._ethtool import EthtoolError, parse_ethtool_k
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import NicError


def read_features(module, ethtool, ifname):
    """parse_ethtool_k() of ``ethtool -k IFACE``; NicError on failure, naming the interface."""
    read = read_ethtool(module, ethtool, ifname, '-k')
    try:
        return parse_ethtool_k(read['stdout'])
    except EthtoolError as exc:
        raise NicError('interface {0}: {1}'.format(ifname, exc), cmd=read['argv'], rc=0, stdout=read['stdout'],
                       stderr='')


def collect_nic_facts(module, interfaces=None, networks=None, nm_properties=None):
    """The ``ansible_facts.nics`` dict, read and parsed here (collect/_nic.read_nics, parsers/_nic_facts)."""
    return nics_from_read(read_nics(module, interfaces, networks, nm_properties))
