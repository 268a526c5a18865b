# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
#
# The members of an IMEX domain group as the inventory gives them, for the imex role's plan (the run's context
# ``imex_members``; plugins/module_utils/plans/_plan_imex.py and rules/_imex.py decide what they mean).  Only the
# hosts of the one group are read (a few dozen per domain), so a run over a thousand nodes reads each node's group,
# not the whole inventory.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain

# Where a member's address may come from (rules/_imex.ADDRESS_SOURCES reads them in that order).
ADDRESS_VARS = ('nodeprep_imex_address', 'ansible_host')


def _fabric(hostvars):
    """The fabric blocks of a host's GPUs when this run gathered them (its ansible_facts.nvidia), else None."""
    facts = hostvars.get('ansible_facts') or {}
    nvidia = facts.get('nvidia') if isinstance(facts, dict) else None
    if not isinstance(nvidia, dict) or not nvidia.get('gpus'):
        return None
    return [{'pci_bus_id': gpu.get('pci_bus_id'), 'fabric': gpu.get('fabric')} for gpu in nvidia['gpus']
            if isinstance(gpu, dict)]


def members(task_vars, group):
    """``{'group', 'found', 'hosts': [{'host', 'values', 'error', 'fabric'}]}`` of inventory group ``group`` (None
    when no group is set): each member's address variables as the inventory resolves them for that host (templated
    in its own variables), and its GPUs' fabric blocks when this run gathered them.  A variable that cannot be
    templated is that member's ``error``."""
    if not group:
        return None
    groups = task_vars.get('groups') or {}
    if group not in groups:
        return {'group': group, 'found': False, 'hosts': []}
    hostvars = task_vars.get('hostvars') or {}
    out = []
    for host in groups[group]:
        entry = {'host': host, 'values': {'inventory_hostname': host}, 'error': None, 'fabric': None}
        try:
            theirs = hostvars[host]
            for name in ADDRESS_VARS:
                value = theirs.get(name)
                if value is not None:
                    entry['values'][name] = plain(value)
            entry['fabric'] = plain(_fabric(theirs))
        except Exception as exc:  # an undefined variable in that host's address: name it, plan nothing
            entry['error'] = 'cannot read its address variables: {0}'.format(exc)
        out.append(entry)
    return {'group': group, 'found': True, 'hosts': out}
