# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""How a node's NVSwitches show in ``kernel_state.pci`` (NVLink 5 switch bridges, PCI NVSwitches, none), and in
words: the driver's rules (fabric manager, NVLSM) and the readiness report read it.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type


def nvswitch_fabric(kernel_state):
    """'nvlink5', 'pci' or 'none' from kernel_facts (older facts without the key: PCI NVSwitches only)."""
    pci = kernel_state.get('pci') or {}
    if pci.get('nvswitch_fabric'):
        return pci['nvswitch_fabric']
    if pci.get('nvlink5_bridge_count'):
        return 'nvlink5'
    return 'pci' if pci.get('nvswitch_count') else 'none'


def fabric_text(kernel_state, kind):
    """How the node's NVSwitches were found, in words (readiness reports it)."""
    pci = (kernel_state or {}).get('pci') or {}
    if kind == 'nvlink5':
        bridges = pci.get('nvlink5_bridge_count')
        return 'NVLink 5 switch fabric ({0} NVLink 5 bridges; its NVSwitches are not on the PCI bus)'.format(
            bridges if bridges is not None else 'unknown number of')
    if kind == 'pci':
        return '{0} NVSwitches on the PCI bus'.format(pci.get('nvswitch_count') or 0)
    return 'no NVSwitch on the PCI bus and no NVLink 5 switch bridge'
