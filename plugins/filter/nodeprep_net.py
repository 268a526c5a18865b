# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side network selection for the gpufleet.nodeprep roles.

``nodeprep_select_nics`` turns the ``ansible_facts.nics`` dictionary (written by
``gpufleet.nodeprep.nic_facts`` / ``gpu_node_facts``) into the sorted list of
interface names chosen by name, by kernel driver or by network (CIDR). The rule
itself is ``select_nics()`` in plugins/module_utils/parsers/_nic_selection.py, the one NIC
selection the modules and the readiness checks use as well.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import NicError, select_nics

# Kept for callers of the former filter-only implementation.
NicSelectError = NicError

__all__ = ['NicSelectError', 'select_nics', 'FilterModule']


def _select_nics_filter(nics, names=None, drivers=None, networks=None):
    try:
        return select_nics(nics, names=names, drivers=drivers, networks=networks)
    except NicError as exc:
        raise AnsibleFilterError('nodeprep_select_nics: {0}'.format(exc))


class FilterModule(object):
    """gpufleet.nodeprep network filters."""

    def filters(self):
        return {
            'nodeprep_select_nics': _select_nics_filter,
        }
